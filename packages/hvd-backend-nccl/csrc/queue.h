// Queuing one operation's NCCL calls on the comm's stream, the same way for every collective:
//   Begin   fails at once on a comm that failed before, and makes the NCCL communicator at its
//           first use (collective: every member reaches the same op first);
//   Settle  turns NCCL's result into a status (aborting the communicator on a failure: a half
//           queued group leaves it unusable) and waits while a non-blocking communicator is
//           still queuing;
//   Finish  settles and hands the op to the watchdog, which follows it to completion.
#pragma once

#include <cstddef>

#include "comm.h"

namespace hvd_nccl {

int Begin(hvd_comm* comm, const char* op);
int Settle(hvd_comm* comm, const char* op, const char* call, ncclResult_t rc);
int Finish(hvd_comm* comm, const char* op, const char* call, ncclResult_t rc, size_t bytes);

// Runs `body` (which issues NCCL calls and returns the first failure, naming its call) between
// ncclGroupStart and ncclGroupEnd. The group is always closed, even after a failure: NCCL keeps
// the group's depth per thread, and the engine's thread goes on calling NCCL.
template <typename Body>
ncclResult_t Grouped(const NcclApi* nccl, const char** call, Body body) {
  ncclResult_t rc = nccl->GroupStart();
  if (rc != ncclSuccess) {
    *call = "ncclGroupStart";
    return rc;
  }
  const ncclResult_t first = body();
  const ncclResult_t end = nccl->GroupEnd();
  if (first != ncclSuccess && first != ncclInProgress) return first;
  *call = "ncclGroupEnd";
  return end;
}

}  // namespace hvd_nccl
