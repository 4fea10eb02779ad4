#include "errors.h"

#include <cstdio>

namespace hvd_mpi {

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS || len <= 0) return "MPI error code " + std::to_string(code);
  return std::string(text, (size_t)len);
}

int StatusOf(int code) {
  int error_class = code;
  MPI_Error_class(code, &error_class);
  switch (error_class) {
    case MPI_ERR_BUFFER:
    case MPI_ERR_COUNT:
    case MPI_ERR_TYPE:
    case MPI_ERR_TAG:
    case MPI_ERR_COMM:
    case MPI_ERR_RANK:
    case MPI_ERR_ROOT:
    case MPI_ERR_GROUP:
    case MPI_ERR_OP:
    case MPI_ERR_ARG:
    case MPI_ERR_TRUNCATE: return HVD_ERR_INVALID_ARGUMENT;
#ifdef MPI_ERR_PROC_ABORTED  // MPI 4.0: a peer's process was aborted
    case MPI_ERR_PROC_ABORTED: return HVD_ERR_PEER_LOST;
#endif
#ifdef MPIX_ERR_PROC_FAILED  // fault-tolerant MPI (ULFM): a peer's process failed
    case MPIX_ERR_PROC_FAILED: return HVD_ERR_PEER_LOST;
#endif
    default: return HVD_ERR_INTERNAL;
  }
}

int Fail(hvd_comm* comm, int status, std::string message) {
  comm->last_error = std::move(message);
  return status;
}

std::string Prefix(const hvd_comm* comm, const char* op) {
  return "mpi " + std::string(op) + " (" + Describe(comm) + "): ";
}

std::string CallFailed(const char* call, int rc) { return std::string(call) + " failed: " + MpiErrorText(rc); }

int Check(hvd_comm* comm, const char* op, const char* call, int rc) {
  if (rc == MPI_SUCCESS) return HVD_OK;
  return Fail(comm, StatusOf(rc), Prefix(comm, op) + CallFailed(call, rc));
}

int Report(char* error, size_t error_len, int status, const std::string& message) {
  if (error && error_len) std::snprintf(error, error_len, "%s", message.c_str());
  return status;
}

}  // namespace hvd_mpi
