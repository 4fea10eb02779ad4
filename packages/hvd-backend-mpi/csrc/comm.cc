// Creating and destroying communicators: one MPI communicator per process set, made from the world
// (world.h) with the members the engine names. MPI needs no store: the engine's is not used.
#include "comm.h"

#include <cstddef>
#include <memory>

#include "errors.h"
#include "runtime.h"
#include "world.h"

namespace hvd_mpi {
namespace {

constexpr int kCreateCommTag = 0x4877;

bool IsWholeWorld(const hvd_comm* comm, int world_size) {
  if (comm->size != world_size) return false;
  for (int32_t r = 0; r < comm->size; ++r)
    if (comm->job_ranks[r] != r) return false;
  return true;
}

// Checks that hvd's job ranks are this MPI world's ranks; otherwise the processes were not started
// as one MPI job (e.g. by horovodrun without --mpi: each is an MPI world of its own).
int CheckJobIsMpiWorld(const hvd_comm* comm, MPI_Comm world, std::string* error) {
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(world, &world_rank);
  MPI_Comm_size(world, &world_size);
  for (int32_t r : comm->job_ranks) {
    if (r < 0 || r >= world_size) {
      *error = "mpi: hvd's job has rank " + std::to_string(r) + ", but the MPI world has " +
               std::to_string(world_size) +
               " process(es): start the job with mpirun (or horovodrun --mpi) so "
               "that hvd's ranks are MPI's";
      return HVD_ERR_INVALID_ARGUMENT;
    }
  }
  if (comm->job_ranks[comm->rank] != world_rank) {
    *error = "mpi: hvd says this process is rank " + std::to_string(comm->job_ranks[comm->rank]) + ", but it is rank " +
             std::to_string(world_rank) +
             " of the MPI world: hvd's ranks must be MPI's "
             "(start the job with mpirun, or horovodrun --mpi)";
    return HVD_ERR_INVALID_ARGUMENT;
  }
  return HVD_OK;
}

int MakeCommunicator(hvd_comm* comm, MPI_Comm world, std::string* error) {
  int world_size = 1;
  MPI_Comm_size(world, &world_size);
  int rc;
  const char* call;
  if (IsWholeWorld(comm, world_size)) {
    call = "MPI_Comm_dup";
    rc = MPI_Comm_dup(world, &comm->comm);
  } else {
    call = "MPI_Comm_create_group";
    std::vector<int> members(comm->job_ranks.begin(), comm->job_ranks.end());
    MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
    rc = MPI_Comm_group(world, &world_group);
    if (rc == MPI_SUCCESS) rc = MPI_Group_incl(world_group, comm->size, members.data(), &group);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(world, group, kCreateCommTag, &comm->comm);
    if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
    if (world_group != MPI_GROUP_NULL) MPI_Group_free(&world_group);
  }
  if (rc != MPI_SUCCESS) {
    *error = "mpi: could not create the communicator of " + Describe(comm) + ": " + CallFailed(call, rc);
    return StatusOf(rc);
  }
  MPI_Comm_set_errhandler(comm->comm, MPI_ERRORS_RETURN);
  int rank = -1;
  MPI_Comm_rank(comm->comm, &rank);
  if (rank != comm->rank) {  // cannot happen with a correct MPI: the group lists members in order
    *error = "mpi: " + Describe(comm) + " got rank " + std::to_string(rank) + " in its MPI communicator";
    return HVD_ERR_INTERNAL;
  }
  return HVD_OK;
}

}  // namespace

std::string Describe(const hvd_comm* comm) {
  bool identity = true;
  for (int32_t r = 0; r < comm->size && identity; ++r) identity = comm->job_ranks[r] == r;
  if (identity) return "rank " + std::to_string(comm->rank) + " of " + std::to_string(comm->size);
  std::string ranks;
  for (int32_t r = 0; r < comm->size; ++r) ranks += (r ? ", " : "") + std::to_string(comm->job_ranks[r]);
  return "rank " + std::to_string(comm->job_ranks[comm->rank]) + ", member " + std::to_string(comm->rank) +
         " of process set [" + ranks + "]";
}

int CommCreate(const hvd_comm_config_v1* config, const hvd_store_v1* store, hvd_comm** out, char* error,
               size_t error_len) {
  if (!config || !out) return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT, "mpi: comm_create without a config");
  *out = nullptr;
  if (config->struct_size < offsetof(hvd_comm_config_v1, device_id) + sizeof(config->device_id)) {
    return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT, "mpi: truncated hvd_comm_config_v1");
  }
  if (config->size < 1 || config->rank < 0 || config->rank >= config->size) {
    return Report(
        error, error_len, HVD_ERR_INVALID_ARGUMENT,
        "mpi: rank " + std::to_string(config->rank) + " is out of range for size " + std::to_string(config->size));
  }
  if (config->device_kind != HVD_DEVICE_CPU) {
    return Report(error, error_len, HVD_ERR_UNSUPPORTED, "mpi: this backend serves CPU (host memory) buffers only");
  }
  auto comm = std::make_unique<hvd_comm>();
  comm->rank = config->rank;
  comm->size = config->size;
  comm->job_ranks.resize(config->size);
  for (int32_t r = 0; r < config->size; ++r) comm->job_ranks[r] = config->job_ranks ? config->job_ranks[r] : r;

  std::string message;
  // Normally the Python package initialised MPI and selected the world before the engine started.
  int status = EnsureInitialized(ThreadsDisabledByEnvironment(), &message);
  if (status == HVD_OK) status = CheckUsableFromEngine(&message);
  MPI_Comm world = World();
  if (status == HVD_OK) status = CheckJobIsMpiWorld(comm.get(), world, &message);
  if (status == HVD_OK) status = MakeCommunicator(comm.get(), world, &message);
  if (status != HVD_OK) return Report(error, error_len, status, message);
  *out = comm.release();
  return HVD_OK;
}

void CommDestroy(hvd_comm* comm) {
  if (!comm) return;
  // After MPI_Finalize (mpi4py's, at exit) no MPI call is allowed, and none is needed.
  if (comm->comm != MPI_COMM_NULL && !Finalized()) MPI_Comm_free(&comm->comm);
  delete comm;
}

const char* LastError(const hvd_comm* comm) { return comm ? comm->last_error.c_str() : "no communicator"; }

}  // namespace hvd_mpi
