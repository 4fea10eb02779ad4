#include "nccl_library.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "horovod/hvd_backend.h"

namespace hvd_nccl {
namespace {

constexpr const char* kSoname = "libnccl.so.2";

std::mutex g_mutex;
NcclApi g_api;
// Set once g_api is complete; read without the lock by every call of the backend.
std::atomic<const NcclApi*> g_loaded{nullptr};

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* out, bool required, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (!*out && required) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
  }
  return *out != nullptr;
}

// Looks up every function in `handle` and checks the version; on failure says why.
bool Bind(void* handle, const std::string& origin, NcclApi* api, std::string* why) {
  std::string missing;
  if (!Resolve(handle, "ncclGetVersion", &api->GetVersion, true, &missing)) {
    *why = origin + " is not NCCL (it has no ncclGetVersion)";
    return false;
  }
  int code = 0;
  if (api->GetVersion(&code) != ncclSuccess || code <= 0) {
    *why = origin + ": ncclGetVersion failed";
    return false;
  }
  api->version = code;
  std::snprintf(api->version_text, sizeof api->version_text, "%s", VersionText(code).c_str());
  std::snprintf(api->origin, sizeof api->origin, "%s", origin.c_str());
  if (code < kMinimumVersion) {
    *why = "NCCL " + VersionText(code) + " (" + origin + ") is too old: hvd-backend-nccl needs NCCL " +
           VersionText(kMinimumVersion) + " or later (ncclSend/ncclRecv)";
    return false;
  }
  Resolve(handle, "ncclGetUniqueId", &api->GetUniqueId, true, &missing);
  Resolve(handle, "ncclCommInitRank", &api->CommInitRank, true, &missing);
  Resolve(handle, "ncclCommInitRankConfig", &api->CommInitRankConfig, false, &missing);
  Resolve(handle, "ncclCommFinalize", &api->CommFinalize, false, &missing);
  Resolve(handle, "ncclCommDestroy", &api->CommDestroy, true, &missing);
  Resolve(handle, "ncclCommAbort", &api->CommAbort, true, &missing);
  Resolve(handle, "ncclCommGetAsyncError", &api->CommGetAsyncError, true, &missing);
  Resolve(handle, "ncclGetErrorString", &api->GetErrorString, true, &missing);
  Resolve(handle, "ncclGetLastError", &api->GetLastError, false, &missing);
  Resolve(handle, "ncclAllReduce", &api->AllReduce, true, &missing);
  Resolve(handle, "ncclBroadcast", &api->Broadcast, true, &missing);
  Resolve(handle, "ncclReduce", &api->Reduce, true, &missing);
  Resolve(handle, "ncclReduceScatter", &api->ReduceScatter, true, &missing);
  Resolve(handle, "ncclAllGather", &api->AllGather, true, &missing);
  Resolve(handle, "ncclSend", &api->Send, true, &missing);
  Resolve(handle, "ncclRecv", &api->Recv, true, &missing);
  Resolve(handle, "ncclGroupStart", &api->GroupStart, true, &missing);
  Resolve(handle, "ncclGroupEnd", &api->GroupEnd, true, &missing);
  Resolve(handle, "ncclRedOpCreatePreMulSum", &api->RedOpCreatePreMulSum, false, &missing);
  Resolve(handle, "ncclRedOpDestroy", &api->RedOpDestroy, false, &missing);
  if (!missing.empty()) {
    *why = "NCCL " + VersionText(code) + " (" + origin + ") lacks " + missing;
    return false;
  }
  return true;
}

// Opens `what` (a path or a soname) and binds it; false with `why` when it does not load or fit.
bool TryOpen(const std::string& what, int flags, const std::string& origin, std::string* why) {
  void* handle = dlopen(what.c_str(), flags);
  if (!handle) {
    const char* text = dlerror();
    *why = text ? text : (what + ": not loaded");
    return false;
  }
  NcclApi api;
  if (!Bind(handle, origin, &api, why)) {
    dlclose(handle);
    return false;
  }
  g_api = api;  // never closed: communicators and their threads live as long as the process
  g_loaded.store(&g_api, std::memory_order_release);
  return true;
}

}  // namespace

std::string VersionText(int code) {
  int major, minor, patch;
  if (code >= 10000) {
    major = code / 10000, minor = code % 10000 / 100, patch = code % 100;
  } else {
    major = code / 1000, minor = code % 1000 / 100, patch = code % 100;
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

const NcclApi* Api() { return g_loaded.load(std::memory_order_acquire); }

int Load(const std::string& explicit_path, const std::vector<std::string>& candidates, std::string* error) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (Api()) return HVD_OK;
  std::string why;
  if (!explicit_path.empty()) {
    if (TryOpen(explicit_path, RTLD_NOW | RTLD_LOCAL, explicit_path, &why)) return HVD_OK;
    *error = "nccl: could not load the NCCL library named by HOROVOD_NCCL_LIBRARY: " + why;
    return HVD_ERR_UNSUPPORTED;
  }
  std::vector<std::string> reasons;
  // Already in the process (e.g. torch's): no second copy, and what the framework uses.
  if (TryOpen(kSoname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, std::string(kSoname) + " (already loaded)", &why))
    return HVD_OK;
  for (const std::string& path : candidates) {
    if (TryOpen(path, RTLD_NOW | RTLD_LOCAL, path, &why)) return HVD_OK;
    reasons.push_back(why);
  }
  if (TryOpen(kSoname, RTLD_NOW | RTLD_LOCAL, kSoname, &why)) return HVD_OK;
  reasons.push_back(why);
  std::string text;
  for (const std::string& r : reasons) text += (text.empty() ? "" : "; ") + r;
  *error = "nccl: no usable NCCL library (" + text +
           "). Install NCCL into this environment: pip install nvidia-nccl-cu13 (CUDA 13) or nvidia-nccl-cu12 "
           "(CUDA 12), or name a libnccl.so.2 with HOROVOD_NCCL_LIBRARY";
  return HVD_ERR_UNSUPPORTED;
}

}  // namespace hvd_nccl
