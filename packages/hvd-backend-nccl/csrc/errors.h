// Failure messages and statuses. Every message names the operation, the member, the NCCL release
// and, for NCCL's own failures, ncclGetErrorString's words (and ncclGetLastError's detail where
// the release has it), e.g. "nccl allreduce (rank 1 of 2, NCCL 2.30.7): ncclAllReduce failed:
// unhandled cuda error (run with NCCL_DEBUG=INFO for details)".
#pragma once

#include <cstddef>
#include <string>

#include "comm.h"

namespace hvd_nccl {

// The hvd_status an NCCL result stands for.
int StatusOf(ncclResult_t rc);

// "nccl allreduce (rank 0 of 2, NCCL 2.30.7): ", the start of every failure message of an op.
std::string Prefix(const hvd_comm* comm, const char* op);

// NCCL's words for `rc` (ncclGetErrorString), and the detail it logged where it keeps one.
std::string NcclWords(const hvd_comm* comm, ncclResult_t rc);

// "<call> failed: <NCCL's words>" for an NCCL call that returned `rc`.
std::string CallFailed(const hvd_comm* comm, const char* call, ncclResult_t rc);

// Records `message` as the last error and returns `status`; the comm stays usable (a refused
// argument, an unsupported dtype).
int Fail(hvd_comm* comm, int status, const std::string& message);

// Records the comm's first lasting failure (later ones keep it: the first is the cause) and
// returns its status; every later call fails with it (Failed).
int Poison(hvd_comm* comm, int status, const std::string& message);

// The lasting failure's status, made the last error again, or HVD_OK while there is none.
int Failed(hvd_comm* comm);

// HVD_OK for ncclSuccess; otherwise poisons the comm with "<prefix><call> failed: ...".
int Check(hvd_comm* comm, const char* op, const char* call, ncclResult_t rc);

// A failure of a call of the device table (with its own last_error()): poisons the comm.
int DeviceFailed(hvd_comm* comm, const char* op, const char* call, int status);

// For calls without a communicator: copies `message` into the caller's buffer, returns `status`.
int Report(char* error, size_t error_len, int status, const std::string& message);

}  // namespace hvd_nccl
