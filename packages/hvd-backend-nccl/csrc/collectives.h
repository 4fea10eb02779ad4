// The collectives of the ABI on NCCL: reductions.cc (allreduce, allreduce_buffers, reducescatter,
// barrier) and movement.cc (broadcast, allgatherv, alltoallv). Each queues its work on the comm's
// stream and returns once NCCL has queued it (queue.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm.h"

namespace hvd_nccl {

int Allreduce(hvd_comm* comm, const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op);
int AllreduceBuffers(hvd_comm* comm, const hvd_buffer_pair* buffers, size_t n, hvd_dtype dtype, hvd_reduce_op op,
                     double postscale);
int Allgatherv(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype);
int Broadcast(hvd_comm* comm, void* buf, size_t count, hvd_dtype dtype, int32_t root);
int Alltoallv(hvd_comm* comm, const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
              hvd_dtype dtype);
int Reducescatter(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                  hvd_reduce_op op);
int Barrier(hvd_comm* comm);

}  // namespace hvd_nccl
