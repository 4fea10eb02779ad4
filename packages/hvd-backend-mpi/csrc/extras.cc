// The library's entry points besides the backend table, called by the Python package through
// ctypes. ctypes opens the same file the engine opens, so both reach one copy of the library and of
// MPI's state: what is initialised or selected here is what the engine's communicators use.
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <string>

#include "errors.h"
#include "horovod/hvd_backend.h"
#include "runtime.h"
#include "world.h"

namespace {

using hvd_mpi::Report;

int RequireInitialized(char* error, size_t error_len) {
  if (hvd_mpi::ProvidedThreadLevel() >= 0) return HVD_OK;
  return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT, "mpi: MPI is not initialised (call hvd_mpi_initialize)");
}

// rank, size, local rank and size (processes sharing memory, i.e. a host), cross rank and size
// (processes of the same local rank, one per host), as Horovod defines them.
int Topology(MPI_Comm comm, int32_t* out, std::string* error) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Comm local = MPI_COMM_NULL, cross = MPI_COMM_NULL;
  int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  if (rc == MPI_SUCCESS) {
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_size(local, &local_size);
    rc = MPI_Comm_split(comm, local_rank, rank, &cross);
  }
  if (rc == MPI_SUCCESS) {
    MPI_Comm_rank(cross, &cross_rank);
    MPI_Comm_size(cross, &cross_size);
  }
  if (cross != MPI_COMM_NULL) MPI_Comm_free(&cross);
  if (local != MPI_COMM_NULL) MPI_Comm_free(&local);
  if (rc != MPI_SUCCESS) {
    *error = "mpi: finding the hosts' ranks: " + hvd_mpi::CallFailed("MPI_Comm_split", rc);
    return hvd_mpi::StatusOf(rc);
  }
  int32_t values[6] = {rank, size, local_rank, local_size, cross_rank, cross_size};
  for (int i = 0; i < 6; ++i) out[i] = values[i];
  return HVD_OK;
}

}  // namespace

extern "C" {

// Initialises MPI unless it is (runtime.h). Returns an hvd_status; the message goes to error.
HVD_BACKEND_EXPORT int hvd_mpi_initialize(int threads_disabled, char* error, size_t error_len) {
  std::string message;
  int status = hvd_mpi::EnsureInitialized(threads_disabled != 0, &message);
  if (status == HVD_OK) status = hvd_mpi::CheckUsableFromEngine(&message);
  return status == HVD_OK ? HVD_OK : Report(error, error_len, status, message);
}

// Selects the world (world.h): the communicator with Fortran handle `comm_f` if `has_comm`, else
// MPI_COMM_WORLD; only its ranks `ranks` when `nranks` > 0. Collective over the world's members.
HVD_BACKEND_EXPORT int hvd_mpi_select_world(int has_comm, int64_t comm_f, const int32_t* ranks, int32_t nranks,
                                            char* error, size_t error_len) {
  if (int status = RequireInitialized(error, error_len)) return status;
  if (has_comm && (comm_f < INT_MIN || comm_f > INT_MAX)) {
    return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT,
                  "mpi: " + std::to_string(comm_f) + " is not a communicator's Fortran handle");
  }
  MPI_Comm parent = has_comm ? MPI_Comm_f2c((MPI_Fint)comm_f) : MPI_COMM_WORLD;
  if (parent == MPI_COMM_NULL) {
    return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT, "mpi: the communicator is MPI_COMM_NULL");
  }
  std::string message;
  int status = hvd_mpi::SelectWorld(parent, ranks, nranks, &message);
  return status == HVD_OK ? HVD_OK : Report(error, error_len, status, message);
}

// Writes rank, size, local_rank, local_size, cross_rank, cross_size of MPI_COMM_WORLD, or of the
// selected world when `of_selected_world`, into out[6]. Collective over that communicator.
HVD_BACKEND_EXPORT int hvd_mpi_topology(int of_selected_world, int32_t* out, char* error, size_t error_len) {
  if (int status = RequireInitialized(error, error_len)) return status;
  std::string message;
  int status = Topology(of_selected_world ? hvd_mpi::World() : MPI_COMM_WORLD, out, &message);
  return status == HVD_OK ? HVD_OK : Report(error, error_len, status, message);
}

// MPI's thread level (0 single, 1 funneled, 2 serialized, 3 multiple), -1 before initialisation.
HVD_BACKEND_EXPORT int hvd_mpi_thread_level(void) { return hvd_mpi::ProvidedThreadLevel(); }

// 1 if this library initialised MPI (and finalises it at exit), 0 if someone else did or nobody.
HVD_BACKEND_EXPORT int hvd_mpi_initialized_here(void) { return hvd_mpi::InitializedHere() ? 1 : 0; }

// MPI_Get_library_version's text (callable at any time), truncated to `len` bytes with its NUL.
HVD_BACKEND_EXPORT int hvd_mpi_library_version(char* buf, size_t len) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int n = 0;
  if (MPI_Get_library_version(version, &n) != MPI_SUCCESS) n = 0;
  if (buf && len) std::snprintf(buf, len, "%.*s", n, version);
  return HVD_OK;
}

}  // extern "C"
