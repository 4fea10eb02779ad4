// hvd_device_v1 on the CUDA runtime, loaded at run time: nothing of CUDA is needed to build hvd or
// import it. The copy of libcudart already in the process (torch's) is preferred, so that streams
// and events handed over by a framework belong to the same runtime.
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "device/device.h"
#include "horovod/hvd_backend.h"

namespace hvdcore {
namespace {

// The few runtime entry points used, declared here (their C prototypes, with handles as void*)
// rather than taken from CUDA's headers.
using cudaError_t = int;
constexpr cudaError_t kCudaSuccess = 0;
constexpr cudaError_t kCudaErrorNotReady = 600;
constexpr unsigned kStreamNonBlocking = 0x1;
constexpr unsigned kEventDisableTiming = 0x2;

struct Runtime {
  cudaError_t (*GetDeviceCount)(int*);
  cudaError_t (*SetDevice)(int);
  cudaError_t (*StreamCreateWithFlags)(void**, unsigned);
  cudaError_t (*StreamDestroy)(void*);
  cudaError_t (*StreamSynchronize)(void*);
  cudaError_t (*StreamWaitEvent)(void*, void*, unsigned);
  cudaError_t (*EventCreateWithFlags)(void**, unsigned);
  cudaError_t (*EventDestroy)(void*);
  cudaError_t (*EventRecord)(void*, void*);
  cudaError_t (*EventQuery)(void*);
  cudaError_t (*EventSynchronize)(void*);
  cudaError_t (*MemcpyAsync)(void*, const void*, size_t, int, void*);
  cudaError_t (*MemsetAsync)(void*, int, size_t, void*);
  cudaError_t (*LaunchHostFunc)(void*, void (*)(void*), void*);
  cudaError_t (*Malloc)(void**, size_t);
  cudaError_t (*Free)(void*);
  cudaError_t (*HostAlloc)(void**, size_t, unsigned);
  cudaError_t (*FreeHost)(void*);
  const char* (*GetErrorString)(cudaError_t);
  cudaError_t (*GetLastError)();
  std::string library;
};

Runtime g_rt;
thread_local std::string t_last_error;

int Check(cudaError_t rc, const char* call) {
  if (rc == kCudaSuccess) return HVD_OK;
  g_rt.GetLastError();  // clears a non-sticky error, so the next call does not see it again
  t_last_error = std::string(call) + " failed: " + g_rt.GetErrorString(rc) + " (cudaError " + std::to_string(rc) +
                 ", " + g_rt.library + ")";
  return HVD_ERR_INTERNAL;
}

// Where libcudart is looked for, in order: HOROVOD_CUDA_RUNTIME_LIBRARY, then the sonames of the
// runtimes hvd supports, newest first (a copy already loaded wins over each of these).
const char* const kSonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};

void* OpenRuntime(std::string* tried) {
  if (const char* path = getenv("HOROVOD_CUDA_RUNTIME_LIBRARY"); path && *path) {
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) *tried += std::string(" ") + path + ": " + dlerror() + ";";
    return h;
  }
  for (const char* name : kSonames) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) return h;
  }
  for (const char* name : kSonames) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
    *tried += std::string(" ") + dlerror() + ";";
  }
  return nullptr;
}

template <typename F>
bool Resolve(void* lib, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (!*out) *missing += std::string(" ") + name;
  return *out != nullptr;
}

// Loads the runtime and asks for its devices once; the answer (a table or why not) is kept.
const std::string& LoadError() {
  static std::string error = [] {
    std::string tried;
    void* lib = OpenRuntime(&tried);
    if (!lib) return "the CUDA runtime (libcudart) could not be loaded:" + tried;
    char path[4096] = "libcudart";
    if (dlinfo(lib, RTLD_DI_ORIGIN, path) == 0) g_rt.library = std::string("libcudart in ") + path;
    std::string missing;
    Resolve(lib, "cudaGetDeviceCount", &g_rt.GetDeviceCount, &missing);
    Resolve(lib, "cudaSetDevice", &g_rt.SetDevice, &missing);
    Resolve(lib, "cudaStreamCreateWithFlags", &g_rt.StreamCreateWithFlags, &missing);
    Resolve(lib, "cudaStreamDestroy", &g_rt.StreamDestroy, &missing);
    Resolve(lib, "cudaStreamSynchronize", &g_rt.StreamSynchronize, &missing);
    Resolve(lib, "cudaStreamWaitEvent", &g_rt.StreamWaitEvent, &missing);
    Resolve(lib, "cudaEventCreateWithFlags", &g_rt.EventCreateWithFlags, &missing);
    Resolve(lib, "cudaEventDestroy", &g_rt.EventDestroy, &missing);
    Resolve(lib, "cudaEventRecord", &g_rt.EventRecord, &missing);
    Resolve(lib, "cudaEventQuery", &g_rt.EventQuery, &missing);
    Resolve(lib, "cudaEventSynchronize", &g_rt.EventSynchronize, &missing);
    Resolve(lib, "cudaMemcpyAsync", &g_rt.MemcpyAsync, &missing);
    Resolve(lib, "cudaMemsetAsync", &g_rt.MemsetAsync, &missing);
    Resolve(lib, "cudaLaunchHostFunc", &g_rt.LaunchHostFunc, &missing);
    Resolve(lib, "cudaMalloc", &g_rt.Malloc, &missing);
    Resolve(lib, "cudaFree", &g_rt.Free, &missing);
    Resolve(lib, "cudaHostAlloc", &g_rt.HostAlloc, &missing);
    Resolve(lib, "cudaFreeHost", &g_rt.FreeHost, &missing);
    Resolve(lib, "cudaGetErrorString", &g_rt.GetErrorString, &missing);
    Resolve(lib, "cudaGetLastError", &g_rt.GetLastError, &missing);
    if (!missing.empty()) return g_rt.library + " lacks:" + missing;
    int count = 0;  // left untouched when the call fails
    cudaError_t rc = g_rt.GetDeviceCount(&count);
    if (rc != kCudaSuccess) {
      return g_rt.library + " loaded, but cudaGetDeviceCount failed: " + g_rt.GetErrorString(rc) + " (cudaError " +
             std::to_string(rc) + "; is there a GPU and its driver?)";
    }
    if (count == 0) return g_rt.library + " loaded, but it sees no GPU (cudaGetDeviceCount: 0)";
    return std::string();
  }();
  return error;
}

const char* LastError() { return t_last_error.c_str(); }
int DeviceCount(int32_t* count) {
  int n = 0;
  int rc = Check(g_rt.GetDeviceCount(&n), "cudaGetDeviceCount");
  *count = n;
  return rc;
}
int SetDevice(int32_t device) { return Check(g_rt.SetDevice(device), "cudaSetDevice"); }
int StreamCreate(int32_t device, hvd_stream_t* out) {
  if (int rc = SetDevice(device)) return rc;
  return Check(g_rt.StreamCreateWithFlags(out, kStreamNonBlocking), "cudaStreamCreateWithFlags");
}
int StreamDestroy(hvd_stream_t s) { return Check(g_rt.StreamDestroy(s), "cudaStreamDestroy"); }
int StreamSynchronize(hvd_stream_t s) { return Check(g_rt.StreamSynchronize(s), "cudaStreamSynchronize"); }
int StreamWaitEvent(hvd_stream_t s, hvd_event_t e) {
  return Check(g_rt.StreamWaitEvent(s, e, 0), "cudaStreamWaitEvent");
}
int EventCreate(int32_t device, hvd_event_t* out) {
  if (int rc = SetDevice(device)) return rc;
  return Check(g_rt.EventCreateWithFlags(out, kEventDisableTiming), "cudaEventCreateWithFlags");
}
int EventDestroy(hvd_event_t e) { return Check(g_rt.EventDestroy(e), "cudaEventDestroy"); }
int EventRecord(hvd_event_t e, hvd_stream_t s) { return Check(g_rt.EventRecord(e, s), "cudaEventRecord"); }
int EventQuery(hvd_event_t e, int* done) {
  cudaError_t rc = g_rt.EventQuery(e);
  *done = rc == kCudaSuccess;
  return rc == kCudaErrorNotReady ? HVD_OK : Check(rc, "cudaEventQuery");
}
int EventSynchronize(hvd_event_t e) { return Check(g_rt.EventSynchronize(e), "cudaEventSynchronize"); }
int MemcpyAsync(void* dst, const void* src, size_t bytes, hvd_copy_kind kind, hvd_stream_t s) {
  // hvd_copy_kind's values are cudaMemcpyKind's.
  return Check(g_rt.MemcpyAsync(dst, src, bytes, (int)kind, s), "cudaMemcpyAsync");
}
int MemsetAsync(void* dst, int value, size_t bytes, hvd_stream_t s) {
  return Check(g_rt.MemsetAsync(dst, value, bytes, s), "cudaMemsetAsync");
}
int LaunchHostFn(hvd_stream_t s, hvd_host_fn fn, void* user_data) {
  return Check(g_rt.LaunchHostFunc(s, fn, user_data), "cudaLaunchHostFunc");
}
int DeviceAlloc(int32_t device, size_t bytes, void** out) {
  if (int rc = SetDevice(device)) return rc;
  return Check(g_rt.Malloc(out, bytes), "cudaMalloc");
}
int DeviceFree(void* p) { return Check(g_rt.Free(p), "cudaFree"); }
int HostAlloc(size_t bytes, void** out) { return Check(g_rt.HostAlloc(out, bytes, 0), "cudaHostAlloc"); }
int HostFree(void* p) { return Check(g_rt.FreeHost(p), "cudaFreeHost"); }

const hvd_device_v1 kCuda = {
    HVD_DEVICE_ABI_VERSION,
    sizeof(hvd_device_v1),
    "cuda",
    HVD_DEVICE_CUDA,
    0,
    LastError,
    DeviceCount,
    SetDevice,
    StreamCreate,
    StreamDestroy,
    StreamSynchronize,
    StreamWaitEvent,
    EventCreate,
    EventDestroy,
    EventRecord,
    EventQuery,
    EventSynchronize,
    MemcpyAsync,
    MemsetAsync,
    LaunchHostFn,
    DeviceAlloc,
    DeviceFree,
    HostAlloc,
    HostFree,
};

}  // namespace

const hvd_device_v1* CudaDevice(std::string* error) {
  const std::string& why = LoadError();
  if (why.empty()) return &kCuda;
  if (error) *error = why;
  return nullptr;
}

}  // namespace hvdcore
