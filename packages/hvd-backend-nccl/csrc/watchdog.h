// Following queued collectives to completion: asynchronous NCCL errors, timeouts, abort.
//
// A device communicator's call returns once its work is queued; the engine records its own event
// after it and waits on that. While it waits, it polls async_error (never blocking), which
// reports, with a message naming the op, the member and NCCL's release:
//   - an error NCCL found since (ncclCommGetAsyncError: a peer lost, a CUDA failure);
//   - a collective still incomplete `timeout` after it was queued. The bound is the comm's
//     timeout_ms: for device communicators the engine passes HOROVOD_NCCL_TIMEOUT there (see
//     README.md), on by default, so a lost peer becomes an error instead of a stream that never
//     drains. Every member applies it to its own queued work, so when one member stops, each of
//     the others either gets NCCL's error or reaches its own deadline: all of them fail.
// The engine then calls abort (ncclCommAbort: NCCL's kernels return, the stream drains) and
// destroys the communicator.
#pragma once

#include <cstddef>

#include "comm.h"

namespace hvd_nccl {

// Records an event on the stream after the op just queued and remembers it with its description.
int Track(hvd_comm* comm, const char* op, size_t bytes);

// The ABI's async_error and abort (hvd_backend_ext_v1).
int AsyncError(hvd_comm* comm);
int Abort(hvd_comm* comm);

// ncclCommAbort on the comm's NCCL communicator, once; the comm then fails every call.
void AbortNccl(hvd_comm* comm);

// Ends the comm's NCCL communicator for comm_destroy: its queued work is waited for (within the
// timeout) and the communicator finalized and destroyed, or aborted when that work does not end;
// then the comm's events and scratch memory are released.
void Retire(hvd_comm* comm);

}  // namespace hvd_nccl
