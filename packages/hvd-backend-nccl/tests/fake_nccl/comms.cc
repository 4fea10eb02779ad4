// The fake's communicators, versions, errors and the tests' control functions.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fake_nccl.h"

namespace fake {
namespace {

std::mutex g_mu;  // guards everything below
const hvd_device_v1* g_device = nullptr;
std::string g_log, g_log_copy;
std::map<std::string, std::shared_ptr<Clique>> g_cliques;  // by unique id
std::map<std::pair<int, std::string>, int> g_failures;      // (rank, call) -> result, once
uint64_t g_next_id = 1;
int g_live_comms = 0;

std::shared_ptr<Clique> CliqueOf(const char* id, int nranks) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::shared_ptr<Clique>& clique = g_cliques[std::string(id, 128)];
  if (!clique) {
    clique = std::make_shared<Clique>();
    clique->nranks = nranks;
  }
  return clique;
}

}  // namespace

const hvd_device_v1* Device() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_device;
}

void Log(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_log += line + "\n";
}

int TakeFailure(int rank, const std::string& call) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_failures.find({rank, call});
  if (it == g_failures.end()) return kSuccess;
  int result = it->second;
  g_failures.erase(it);
  return result;
}

}  // namespace fake

using fake::Comm;

// The one NCCL struct the backend passes: the prefix of ncclConfig_t it fills.
struct ConfigPrefix {
  size_t size;
  unsigned magic, version;
  int blocking;
};

namespace {

int Version() {
  const char* text = std::getenv("FAKE_NCCL_VERSION");
  return text ? std::atoi(text) : 23007;
}

int Init(Handle** out, int nranks, const char* id, int rank, bool blocking, const char* call) {
  *out = nullptr;
  if (int failure = fake::TakeFailure(rank, call)) return failure;
  auto comm = std::make_shared<Comm>();
  comm->clique = fake::CliqueOf(id, nranks);
  comm->rank = rank;
  comm->nranks = nranks;
  comm->blocking = blocking;
  fake::Log(std::string(call) + " rank=" + std::to_string(rank) + " nranks=" + std::to_string(nranks) +
            (blocking ? " blocking" : " nonblocking"));
  fake::Clique& c = *comm->clique;
  {
    std::unique_lock<std::mutex> lock(c.mu);
    c.joined++;
    c.cv.notify_all();
    // A bound so that a broken test fails instead of hanging; the backend bounds non-blocking
    // creation itself (ncclCommGetAsyncError below).
    if (blocking && !c.cv.wait_for(lock, std::chrono::seconds(60), [&] { return c.joined >= c.nranks; }))
      return fake::kSystem;
  }
  {
    std::lock_guard<std::mutex> lock(fake::g_mu);
    fake::g_live_comms++;
  }
  *out = new Handle{comm};
  return blocking ? fake::kSuccess : fake::kInProgress;
}

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

// ---- The tests' controls.

FAKE_EXPORT void fake_nccl_attach(const hvd_device_v1* device) {
  std::lock_guard<std::mutex> lock(fake::g_mu);
  fake::g_device = device;
}

// The next `call` ("ncclAllReduce", "ncclCommInitRankConfig"...) made for `rank` returns `result`.
FAKE_EXPORT void fake_nccl_fail_next(int rank, const char* call, int result) {
  std::lock_guard<std::mutex> lock(fake::g_mu);
  fake::g_failures[{rank, call}] = result;
}

// The log since the last call, one line per call the backend made (cleared by reading it).
FAKE_EXPORT const char* fake_nccl_log() {
  std::lock_guard<std::mutex> lock(fake::g_mu);
  fake::g_log_copy.swap(fake::g_log);
  fake::g_log.clear();
  return fake::g_log_copy.c_str();
}

// Communicators made and not yet destroyed or aborted.
FAKE_EXPORT int fake_nccl_live_comms() {
  std::lock_guard<std::mutex> lock(fake::g_mu);
  return fake::g_live_comms;
}

// ---- NCCL's functions.

FAKE_EXPORT int ncclGetVersion(int* version) {
  *version = Version();
  return fake::kSuccess;
}

FAKE_EXPORT int ncclGetUniqueId(char* id) {
  std::memset(id, 0, 128);
  std::lock_guard<std::mutex> lock(fake::g_mu);
  std::snprintf(id, 128, "fake-nccl-%llu", (unsigned long long)fake::g_next_id++);
  return fake::kSuccess;
}

struct UniqueId {
  char internal[128];
};

FAKE_EXPORT int ncclCommInitRank(Handle** comm, int nranks, UniqueId id, int rank) {
  return Init(comm, nranks, id.internal, rank, true, "ncclCommInitRank");
}

FAKE_EXPORT int ncclCommInitRankConfig(Handle** comm, int nranks, UniqueId id, int rank, ConfigPrefix* config) {
  if (!config || config->magic != 0xcafebeef || config->size < sizeof(ConfigPrefix)) return fake::kInvalidArgument;
  return Init(comm, nranks, id.internal, rank, config->blocking != 0, "ncclCommInitRankConfig");
}

int AsyncErrorFor(int rank);

FAKE_EXPORT int ncclCommGetAsyncError(Handle* handle, int* state) {
  Comm& comm = *handle->comm;
  const int injected = AsyncErrorFor(comm.rank);
  std::lock_guard<std::mutex> lock(comm.clique->mu);
  if (injected != fake::kSuccess) {
    *state = injected;
  } else if (comm.clique->joined < comm.nranks) {
    *state = fake::kInProgress;  // a non-blocking creation that waits for members
  } else if (comm.pending_polls > 0) {
    comm.pending_polls--;
    *state = fake::kInProgress;
  } else {
    *state = fake::kSuccess;
  }
  return fake::kSuccess;
}

namespace {
std::mutex g_async_mu;
std::map<int, int> g_async_errors;  // by rank, applied to that rank's communicators
}  // namespace

// Every later ncclCommGetAsyncError on the communicators of `rank` reports `result`.
FAKE_EXPORT void fake_nccl_set_async_error(int rank, int result) {
  std::lock_guard<std::mutex> lock(g_async_mu);
  g_async_errors[rank] = result;
}

int AsyncErrorFor(int rank) {
  std::lock_guard<std::mutex> lock(g_async_mu);
  auto it = g_async_errors.find(rank);
  return it == g_async_errors.end() ? fake::kSuccess : it->second;
}

FAKE_EXPORT const char* ncclGetErrorString(int result) {
  switch (result) {
    case fake::kSuccess: return "no error";
    case fake::kUnhandledCuda: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case fake::kSystem: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case fake::kInternal: return "internal error - please report this issue to the NCCL developers";
    case fake::kInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case fake::kInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case fake::kRemote: return "remote process exited or there was a network error";
    case fake::kInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

FAKE_EXPORT const char* ncclGetLastError(Handle* handle) { return handle ? "fake NCCL's last error" : ""; }

FAKE_EXPORT int ncclCommFinalize(Handle*) { return fake::kSuccess; }

namespace {
void Release(Handle* handle, const char* call) {
  fake::Log(std::string(call) + " rank=" + std::to_string(handle->comm->rank));
  {
    std::lock_guard<std::mutex> lock(fake::g_mu);
    fake::g_live_comms--;
  }
  delete handle;
}
}  // namespace

FAKE_EXPORT int ncclCommDestroy(Handle* handle) {
  Release(handle, "ncclCommDestroy");
  return fake::kSuccess;
}

// As NCCL's: this member's queued work returns at once (its stream drains); its peers wait on.
FAKE_EXPORT int ncclCommAbort(Handle* handle) {
  fake::Clique& c = *handle->comm->clique;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    handle->comm->aborted = true;
  }
  c.cv.notify_all();
  Release(handle, "ncclCommAbort");
  return fake::kSuccess;
}

FAKE_EXPORT int ncclRedOpCreatePreMulSum(int* op, void* scalar, int type, int residence, Handle* handle) {
  if (residence != 1) return fake::kInvalidArgument;  // the backend passes host scalars
  double value = 0;
  if (type == 8)
    std::memcpy(&value, scalar, sizeof value);
  else if (type == 7) {
    float f;
    std::memcpy(&f, scalar, sizeof f);
    value = f;
  } else {
    uint16_t bits;
    std::memcpy(&bits, scalar, sizeof bits);
    uint32_t wide = type == 9 ? (uint32_t)bits << 16 : 0;
    if (type == 6) {  // float16 -> float
      uint32_t sign = (bits & 0x8000u) << 16, exp = (bits >> 10) & 0x1f, mant = bits & 0x3ff;
      wide = exp == 0 ? sign : sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &wide, sizeof f);
    value = f;
  }
  Comm& comm = *handle->comm;
  std::lock_guard<std::mutex> lock(comm.clique->mu);
  *op = fake::kFirstCustomOp + (int)comm.custom_ops.size();
  while (comm.custom_ops.count(*op)) ++*op;
  comm.custom_ops[*op] = value;
  char line[96];
  std::snprintf(line, sizeof line, "ncclRedOpCreatePreMulSum rank=%d scalar=%g", comm.rank, value);
  fake::Log(line);
  return fake::kSuccess;
}

FAKE_EXPORT int ncclRedOpDestroy(int op, Handle* handle) {
  Comm& comm = *handle->comm;
  std::lock_guard<std::mutex> lock(comm.clique->mu);
  fake::Log("ncclRedOpDestroy rank=" + std::to_string(comm.rank));
  return comm.custom_ops.erase(op) ? fake::kSuccess : fake::kInvalidArgument;
}
