// The collectives on the shared-memory transport (collectives.cc), with the contracts of the ABI
// functions of the same names (horovod/hvd_backend.h), for a group of two or more members. The
// host backend calls them once it has checked the arguments and returned early from empty
// collectives. They throw Failure (host_backend.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/buffer_list.h"
#include "horovod/hvd_backend.h"
#include "shm/group.h"

namespace hvd_shm {

// Each result is multiplied by `postscale` (hvd::scale) before it is written.
void Allreduce(Group& g, const hvd_common::BufferList& buffers, hvd_dtype dtype, hvd_reduce_op op, double postscale);
void Allgatherv(Group& g, const void* sendbuf, void* recvbuf, const size_t* recvcounts, size_t element_size);
void Broadcast(Group& g, void* buf, size_t bytes, int32_t root);
void Alltoallv(Group& g, const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
               size_t element_size);
void Reducescatter(Group& g, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                   hvd_reduce_op op);
void Barrier(Group& g);

}  // namespace hvd_shm
