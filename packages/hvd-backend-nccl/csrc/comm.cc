#include "comm.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "errors.h"
#include "nccl_library.h"
#include "watchdog.h"

namespace hvd_nccl {
namespace {

// The store key of the communicator's NCCL unique id, under the engine's prefix for it.
std::string UniqueIdKey(const hvd_comm* comm) { return comm->key_prefix + "nccl/unique-id"; }

std::string Seconds(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", (double)ms.count() / 1000.0);
  return text;
}

// Member 0 makes the id and publishes it; the others wait for it, within the comm's timeout.
int ExchangeUniqueId(hvd_comm* comm, const char* op, ncclUniqueId* id) {
  const std::string key = UniqueIdKey(comm);
  if (comm->rank == 0) {
    if (int rc = Check(comm, op, "ncclGetUniqueId", comm->nccl->GetUniqueId(id))) return rc;
    if (comm->size == 1) return HVD_OK;  // nobody reads it, and the store never forgets keys
    int rc = comm->store.set(comm->store.ctx, key.c_str(), id, sizeof *id);
    if (rc == HVD_OK) return HVD_OK;
    return Poison(comm, rc,
                  Prefix(comm, op) + "publishing the NCCL unique id (store key '" + key + "') failed with status " +
                      std::to_string(rc));
  }
  void* value = nullptr;
  size_t len = 0;
  int rc = comm->store.get(comm->store.ctx, key.c_str(), &value, &len, (int64_t)comm->timeout.count());
  if (rc != HVD_OK) {
    return Poison(comm, rc == HVD_ERR_TIMEOUT ? rc : HVD_ERR_INTERNAL,
                  Prefix(comm, op) + "the NCCL unique id from member 0 (rank " + std::to_string(comm->job_ranks[0]) +
                      ") did not arrive within " + Seconds(comm->timeout) + " (store key '" + key + "', status " +
                      std::to_string(rc) + ")");
  }
  const bool fits = len == sizeof *id;
  if (fits) std::memcpy(id, value, sizeof *id);
  comm->store.release(comm->store.ctx, value);
  if (!fits) {
    return Poison(
        comm, HVD_ERR_INTERNAL,
        Prefix(comm, op) + "store key '" + key + "' holds " + std::to_string(len) + " bytes, not an NCCL unique id");
  }
  return HVD_OK;
}

// Said after NCCL's own words when it could not use CUDA: which part is missing.
std::string CudaHint(const hvd_comm* comm) {
  int32_t count = 0;
  if (comm->device->device_count(&count) != HVD_OK) {
    const char* text = comm->device->last_error ? comm->device->last_error() : nullptr;
    return "; the " + std::string(comm->device->name) + " device reports: " + (text && *text ? text : "no device") +
           " (is a GPU visible here, with the NVIDIA driver, libcuda.so.1, installed?)";
  }
  if (count <= comm->device_id) {
    return "; the " + std::string(comm->device->name) + " device has " + std::to_string(count) +
           " GPU(s), none with ordinal " + std::to_string(comm->device_id);
  }
  return "";
}

}  // namespace

std::string Describe(const hvd_comm* comm) {
  std::string members;
  bool whole_job = true;
  for (int32_t r = 0; r < comm->size; ++r) {
    whole_job = whole_job && comm->job_ranks[r] == r;
    members += (r ? ", " : "") + std::to_string(comm->job_ranks[r]);
  }
  const std::string own = "rank " + std::to_string(comm->job_ranks[comm->rank]);
  if (whole_job) return own + " of " + std::to_string(comm->size);
  return own + ", member " + std::to_string(comm->rank) + " of process set [" + members + "]";
}

int EnsureNcclComm(hvd_comm* comm, const char* op) {
  if (comm->nccl_comm) return HVD_OK;
  // NCCL binds a communicator to the device current when it is made.
  if (int rc = comm->device->set_device(comm->device_id)) return DeviceFailed(comm, op, "set_device", rc);
  ncclUniqueId id;
  if (int rc = ExchangeUniqueId(comm, op, &id)) return rc;
  const NcclApi* nccl = comm->nccl;
  ncclResult_t rc;
  const char* call;
  if (nccl->has_non_blocking()) {
    // Non-blocking: every call returns, so a member that never joins (or a peer that dies in a
    // later call) is a timeout here instead of a thread stuck inside NCCL.
    ncclConfigPrefix config;
    config.blocking = 0;
    call = "ncclCommInitRankConfig";
    rc = nccl->CommInitRankConfig(&comm->nccl_comm, comm->size, id, comm->rank, &config);
    comm->non_blocking = true;
  } else {
    call = "ncclCommInitRank";  // NCCL < 2.14: bounded by NCCL alone
    rc = nccl->CommInitRank(&comm->nccl_comm, comm->size, id, comm->rank);
  }
  if (rc != ncclSuccess && rc != ncclInProgress) {
    std::string text = Prefix(comm, op) + "creating the NCCL communicator: " + CallFailed(comm, call, rc);
    if (rc == ncclUnhandledCudaError || rc == ncclSystemError) text += CudaHint(comm);
    if (comm->nccl_comm) nccl->CommAbort(comm->nccl_comm);
    comm->nccl_comm = nullptr;
    comm->aborted = true;
    return Poison(comm, StatusOf(rc), text);
  }
  return WaitQueued(comm, op, rc);
}

int WaitQueued(hvd_comm* comm, const char* op, ncclResult_t rc) {
  const NcclApi* nccl = comm->nccl;
  const auto deadline = std::chrono::steady_clock::now() + comm->timeout;
  auto pause = std::chrono::microseconds(10);
  ncclResult_t state = rc;
  // Polled at once: most calls finish queuing within microseconds; the pause grows only for those
  // that wait on peers (a communicator being made, connections set up at a first send).
  while (state == ncclInProgress) {
    if (ncclResult_t polled = nccl->CommGetAsyncError(comm->nccl_comm, &state)) state = polled;
    if (state != ncclInProgress) break;
    if (std::chrono::steady_clock::now() > deadline) {
      AbortNccl(comm);
      return Poison(comm, HVD_ERR_TIMEOUT,
                    Prefix(comm, op) + "NCCL did not finish setting up or queuing the operation within " +
                        Seconds(comm->timeout) +
                        " (a member that never joined, or a lost peer); the communicator is aborted");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  if (state == ncclSuccess) return HVD_OK;
  std::string text = Prefix(comm, op) + CallFailed(comm, "NCCL", state);
  AbortNccl(comm);
  return Poison(comm, StatusOf(state), text);
}

int CommCreate(const hvd_comm_config_v1* config, const hvd_store_v1* store, hvd_comm** out, char* error,
               size_t error_len) {
  if (!config || !out) return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT, "nccl: comm_create without a config");
  *out = nullptr;
  if (config->struct_size < offsetof(hvd_comm_config_v1, stream) + sizeof(config->stream)) {
    return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT,
                  "nccl: this hvd-core passes no device table to backends (it predates device communicators); "
                  "install hvd-core 0.2 or later");
  }
  if (config->device_kind != HVD_DEVICE_CUDA) {
    return Report(error, error_len, HVD_ERR_UNSUPPORTED,
                  "nccl: NCCL moves CUDA tensors only; CPU tensors go to a CPU backend (Gloo or MPI)");
  }
  const hvd_device_v1* device = config->device;
  if (!device || device->abi_version != HVD_DEVICE_ABI_VERSION || device->struct_size < sizeof(hvd_device_v1)) {
    return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT,
                  "nccl: comm_create needs the engine's device table (hvd_device_v1, version 1)");
  }
  if (config->size < 1 || config->rank < 0 || config->rank >= config->size || !config->job_ranks ||
      !config->key_prefix || config->timeout_ms <= 0 || config->device_id < 0) {
    return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT, "nccl: comm_create with an invalid config");
  }
  if (config->size > 1 && (!store || !store->set || !store->get || !store->release)) {
    return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT, "nccl: comm_create needs the engine's store");
  }
  std::string why;
  if (!Api()) {  // not loaded by the Python package first (horovod.backends.nccl.library_path)
    const char* named = std::getenv("HOROVOD_NCCL_LIBRARY");
    if (int rc = Load(named ? named : "", {}, &why)) return Report(error, error_len, rc, why);
  }
  auto* comm = new hvd_comm;
  comm->rank = config->rank;
  comm->size = config->size;
  comm->device_id = config->device_id;
  comm->job_ranks.assign(config->job_ranks, config->job_ranks + config->size);
  comm->key_prefix = config->key_prefix;
  comm->timeout = std::chrono::milliseconds(config->timeout_ms);
  if (store) comm->store = *store;
  comm->device = device;
  comm->stream = config->stream;
  comm->nccl = Api();
  *out = comm;
  return HVD_OK;
}

void CommDestroy(hvd_comm* comm) {
  if (!comm) return;
  Retire(comm);
  delete comm;
}

const char* LastError(const hvd_comm* comm) { return comm ? comm->last_error.c_str() : "nccl: no communicator"; }

}  // namespace hvd_nccl
