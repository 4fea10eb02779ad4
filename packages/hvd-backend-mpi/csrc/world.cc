#include "world.h"

#include <mutex>
#include <vector>

#include "errors.h"
#include "horovod/hvd_backend.h"

namespace hvd_mpi {
namespace {

std::mutex g_mutex;
MPI_Comm g_world = MPI_COMM_NULL;  // ours (a duplicate or a new communicator), or null: MPI_COMM_WORLD

// Any tag distinguishes concurrent MPI_Comm_create_group calls; ours are one at a time.
constexpr int kCreateWorldTag = 0x4876;

int FromRanks(MPI_Comm parent, const int32_t* ranks, int32_t nranks, MPI_Comm* out, std::string* error) {
  int parent_size = 0;
  MPI_Comm_size(parent, &parent_size);
  std::vector<int> members(ranks, ranks + nranks);
  for (int r : members) {
    if (r < 0 || r >= parent_size) {
      *error = "mpi: rank " + std::to_string(r) + " is not in the MPI world of " + std::to_string(parent_size) +
               " processes";
      return HVD_ERR_INVALID_ARGUMENT;
    }
  }
  MPI_Group parent_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  int rc = MPI_Comm_group(parent, &parent_group);
  if (rc == MPI_SUCCESS) rc = MPI_Group_incl(parent_group, nranks, members.data(), &group);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_create_group(parent, group, kCreateWorldTag, out);
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (parent_group != MPI_GROUP_NULL) MPI_Group_free(&parent_group);
  if (rc != MPI_SUCCESS) {
    *error = "mpi: making the world of the given ranks: " + CallFailed("MPI_Comm_create_group", rc);
    return StatusOf(rc);
  }
  return HVD_OK;
}

}  // namespace

int SelectWorld(MPI_Comm parent, const int32_t* ranks, int32_t nranks, std::string* error) {
  int inter = 0;
  if (MPI_Comm_test_inter(parent, &inter) != MPI_SUCCESS || inter) {
    *error = "mpi: an intercommunicator cannot be hvd's world; pass an intracommunicator (e.g. from Split)";
    return HVD_ERR_INVALID_ARGUMENT;
  }
  MPI_Comm world = MPI_COMM_NULL;
  if (nranks > 0) {
    int status = FromRanks(parent, ranks, nranks, &world, error);
    if (status != HVD_OK) return status;
  } else {
    int rc = MPI_Comm_dup(parent, &world);
    if (rc != MPI_SUCCESS) {
      *error = "mpi: duplicating the world's communicator: " + CallFailed("MPI_Comm_dup", rc);
      return StatusOf(rc);
    }
  }
  if (world == MPI_COMM_NULL) {  // MPI_Comm_create_group's answer to a process outside the group
    *error = "mpi: this process is not among the ranks of the world it was asked to join";
    return HVD_ERR_INVALID_ARGUMENT;
  }
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  std::lock_guard<std::mutex> lock(g_mutex);
  // Communicators made from the previous world live on without it.
  if (g_world != MPI_COMM_NULL) MPI_Comm_free(&g_world);
  g_world = world;
  return HVD_OK;
}

MPI_Comm World() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_world != MPI_COMM_NULL ? g_world : MPI_COMM_WORLD;
}

}  // namespace hvd_mpi
