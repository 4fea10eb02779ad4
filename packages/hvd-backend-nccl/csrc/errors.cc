#include "errors.h"

#include <cstdio>

namespace hvd_nccl {

int StatusOf(ncclResult_t rc) {
  switch (rc) {
    case ncclSuccess: return HVD_OK;
    case ncclInvalidArgument:
    case ncclInvalidUsage: return HVD_ERR_INVALID_ARGUMENT;
    // A peer's failure (2.13), or a socket to it that broke: the job lost that member.
    case ncclRemoteError:
    case ncclSystemError: return HVD_ERR_PEER_LOST;
    case ncclTimeout: return HVD_ERR_TIMEOUT;
    default: return HVD_ERR_INTERNAL;
  }
}

std::string Prefix(const hvd_comm* comm, const char* op) {
  std::string version = comm->nccl ? std::string(", NCCL ") + comm->nccl->version_text : std::string();
  return "nccl " + std::string(op) + " (" + Describe(comm) + version + "): ";
}

std::string NcclWords(const hvd_comm* comm, ncclResult_t rc) {
  const NcclApi* nccl = comm->nccl;
  const char* words = nccl ? nccl->GetErrorString(rc) : nullptr;
  std::string text = words && *words ? words : "NCCL result " + std::to_string((int)rc);
  // The detail NCCL logged (2.13); never asked of an aborted communicator, which is freed.
  const char* detail = nccl && nccl->GetLastError && !comm->aborted ? nccl->GetLastError(comm->nccl_comm) : nullptr;
  if (detail && *detail) text += std::string(" (") + detail + ")";
  return text;
}

std::string CallFailed(const hvd_comm* comm, const char* call, ncclResult_t rc) {
  return std::string(call) + " failed: " + NcclWords(comm, rc);
}

int Fail(hvd_comm* comm, int status, const std::string& message) {
  std::lock_guard<std::mutex> lock(comm->mu);
  comm->last_error = message;
  return status;
}

int Poison(hvd_comm* comm, int status, const std::string& message) {
  std::lock_guard<std::mutex> lock(comm->mu);
  if (comm->failed.load() == HVD_OK) {
    comm->failure = message;
    comm->failed.store(status);
  }
  comm->last_error = comm->failure;
  return comm->failed.load();
}

int Failed(hvd_comm* comm) {
  if (comm->failed.load() == HVD_OK) return HVD_OK;
  std::lock_guard<std::mutex> lock(comm->mu);
  comm->last_error = comm->failure;
  return comm->failed.load();
}

int Check(hvd_comm* comm, const char* op, const char* call, ncclResult_t rc) {
  if (rc == ncclSuccess) return HVD_OK;
  return Poison(comm, StatusOf(rc), Prefix(comm, op) + CallFailed(comm, call, rc));
}

int DeviceFailed(hvd_comm* comm, const char* op, const char* call, int status) {
  const char* text = comm->device->last_error ? comm->device->last_error() : nullptr;
  return Poison(
      comm, status == HVD_OK ? HVD_ERR_INTERNAL : status,
      Prefix(comm, op) + comm->device->name + " " + call + " failed: " + (text && *text ? text : "no detail"));
}

int Report(char* error, size_t error_len, int status, const std::string& message) {
  if (error && error_len) std::snprintf(error, error_len, "%s", message.c_str());
  return status;
}

}  // namespace hvd_nccl
