// The communicator behind the opaque hvd_comm handle, shared by every source of the backend.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "horovod/hvd_backend.h"

struct hvd_comm {
  // The members' own MPI communicator, created from the world (world.h) for this process set.
  MPI_Comm comm = MPI_COMM_NULL;
  int32_t rank = 0;
  int32_t size = 1;
  std::vector<int32_t> job_ranks;  // job-level rank of each member, for messages
  std::string last_error;
  // The int counts and displacements the MPI v-collectives take, kept between calls (grow-only).
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
};

namespace hvd_mpi {

// "rank 0 of 2" or "rank 3, member 1 of process set [1, 3]".
std::string Describe(const hvd_comm* comm);

// The ABI functions, installed in the hvd_backend_v1 table by backend.cc.
int CommCreate(const hvd_comm_config_v1* config, const hvd_store_v1* store, hvd_comm** out, char* error,
               size_t error_len);
void CommDestroy(hvd_comm* comm);
const char* LastError(const hvd_comm* comm);
int Allreduce(hvd_comm* comm, const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op);
int Allgatherv(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype);
int Broadcast(hvd_comm* comm, void* buf, size_t count, hvd_dtype dtype, int32_t root);
int Alltoallv(hvd_comm* comm, const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
              hvd_dtype dtype);
int Reducescatter(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                  hvd_reduce_op op);
int Barrier(hvd_comm* comm);
int Send(hvd_comm* comm, const void* buf, size_t bytes, int32_t peer, int32_t tag);
int Recv(hvd_comm* comm, void* buf, size_t bytes, int32_t peer, int32_t tag);

}  // namespace hvd_mpi
