// Multi-buffer allreduce with a scale (hvd_backend_ext_v1::allreduce_buffers): the engine's fused
// tensors and averages, each tensor read and written where it is.
//
// Through shared memory, the buffers are copied straight into the slots and the results straight
// out of them, scaled by the member that reduces each part while the part is still in cache: the
// engine's fusion buffer, its two copies and its scaling pass disappear. Over TCP, Gloo's ring
// needs one contiguous buffer: the buffers are packed into the communicator's staging space (as
// the engine would have done) and the results scaled on the way back out.
#include <cstring>
#include <new>
#include <vector>

#include "buffer_list.h"
#include "comm.h"
#include "elements.h"
#include "errors.h"
#include "reduce_fn.h"
#include "shm_group.h"

namespace hvd_gloo {
namespace {

void ScaleAll(const BufferList& buffers, hvd_dtype dtype, double postscale) {
  if (postscale == 1.0) return;
  buffers.ForEachRun(0, buffers.count(), [&](const uint8_t*, uint8_t* recv, size_t, size_t n) {
    hvd::scale(dtype, recv, n, postscale);
  });
}

// The multi-buffer allreduce once arguments are checked. Throws only std::bad_alloc.
int Reduce(hvd_comm* comm, const hvd_buffer_pair* pairs, size_t n, hvd_dtype dtype, hvd_reduce_op op,
           double postscale) {
  const size_t element = hvd::dtype_size(dtype);
  const BufferList buffers(pairs, n, element);
  if (buffers.count() == 0) return HVD_OK;
  if (comm->shm) {  // only ever set for communicators of several members
    return Guarded(comm, "allreduce", [&] { ShmAllreduce(*comm->shm, buffers, dtype, op, postscale); });
  }
  int rc = HVD_OK;
  if (comm->size == 1) {
    for (size_t i = 0; i < n; ++i) {
      if (pairs[i].count && pairs[i].sendbuf != pairs[i].recvbuf)
        std::memcpy(pairs[i].recvbuf, pairs[i].sendbuf, pairs[i].count * element);
    }
  } else if (n == 1) {
    rc = Allreduce(comm, pairs[0].sendbuf, pairs[0].recvbuf, pairs[0].count, dtype, op);
  } else {
    std::vector<uint8_t>& packed = comm->packed;
    if (packed.size() < buffers.count() * element) packed.resize(buffers.count() * element);
    buffers.Gather(0, buffers.count(), packed.data());
    rc = Allreduce(comm, packed.data(), packed.data(), buffers.count(), dtype, op);
    if (rc == HVD_OK) buffers.Scatter(packed.data(), 0, buffers.count());
  }
  if (rc == HVD_OK) ScaleAll(buffers, dtype, postscale);
  return rc;
}

}  // namespace

int AllreduceBuffers(hvd_comm* comm, const hvd_buffer_pair* pairs, size_t n, hvd_dtype dtype, hvd_reduce_op op,
                     double postscale) {
  if (!ReduceFunction(dtype, op)) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT, "gloo allreduce (" + Describe(comm) + "): unknown dtype or reduce op");
  }
  if (n && !pairs) return Fail(comm, HVD_ERR_INVALID_ARGUMENT, "gloo allreduce (" + Describe(comm) + "): no buffers");
  if (postscale != 1.0 && dtype == HVD_DTYPE_BOOL) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT, "gloo allreduce (" + Describe(comm) + "): bool cannot be scaled");
  }
  try {
    return Reduce(comm, pairs, n, dtype, op, postscale);
  } catch (const std::bad_alloc&) {  // nothing may throw across the C ABI
    return Fail(comm, HVD_ERR_INTERNAL, "gloo allreduce (" + Describe(comm) + "): out of memory");
  }
}

}  // namespace hvd_gloo
