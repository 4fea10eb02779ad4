#include "queue.h"

#include "errors.h"
#include "watchdog.h"

namespace hvd_nccl {

int Begin(hvd_comm* comm, const char* op) {
  if (int status = Failed(comm)) return status;
  return EnsureNcclComm(comm, op);
}

int Settle(hvd_comm* comm, const char* op, const char* call, ncclResult_t rc) {
  if (rc != ncclSuccess && rc != ncclInProgress) {
    const std::string text = Prefix(comm, op) + CallFailed(comm, call, rc);  // before the abort frees it
    AbortNccl(comm);
    return Poison(comm, StatusOf(rc), text);
  }
  return WaitQueued(comm, op, rc);
}

int Finish(hvd_comm* comm, const char* op, const char* call, ncclResult_t rc, size_t bytes) {
  if (int status = Settle(comm, op, call, rc)) return status;
  return Track(comm, op, bytes);
}

}  // namespace hvd_nccl
