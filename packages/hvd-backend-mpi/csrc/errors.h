// Turning MPI error codes into hvd_status codes and last_error messages.
//
// Every communicator this backend creates uses MPI_ERRORS_RETURN, so that a failing MPI call
// returns a code here instead of aborting the job, and the engine raises it on the caller's rank,
// naming the operation. (A rank that dies is still MPI's launcher's business: mpirun stops the
// job and says which rank failed.)
#pragma once

#include <cstddef>
#include <string>

#include "comm.h"

namespace hvd_mpi {

// MPI's own words for `code`, e.g. "MPI_ERR_COUNT: invalid count argument".
std::string MpiErrorText(int code);

// The hvd_status an MPI error code stands for.
int StatusOf(int code);

// Records `message` as the communicator's last error and returns `status`.
int Fail(hvd_comm* comm, int status, std::string message);

// "mpi allreduce (rank 0 of 2): ", the start of every failure message of an operation.
std::string Prefix(const hvd_comm* comm, const char* op);

// HVD_OK for MPI_SUCCESS; otherwise records "<prefix><call> failed: <MPI's words>" and returns the status.
int Check(hvd_comm* comm, const char* op, const char* call, int rc);

// For calls without a communicator (comm_create, the extra entry points): copies `message` into the
// caller's buffer and returns `status`.
int Report(char* error, size_t error_len, int status, const std::string& message);

// "<call> failed: <MPI's words>" for an MPI call that returned `rc`.
std::string CallFailed(const char* call, int rc);

}  // namespace hvd_mpi
