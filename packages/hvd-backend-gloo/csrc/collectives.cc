// The collectives Gloo implements itself: allreduce, allgatherv, broadcast, barrier. When every
// member runs on this host they go through shared memory instead (shm_collectives.cc).
//
// Each one is Gloo's unbound-buffer algorithm driven the way torch.distributed's ProcessGroupGloo
// drives it (options object, then gloo::allreduce/allgatherv/...), directly on the caller's
// buffers: no staging copies. Small allreduces take one exchange round instead of Gloo's ring
// (allreduce_small.cc). Empty collectives return at once on every member (all members pass the
// same counts), and a communicator of one member copies locally.
#include <cstdlib>
#include <cstring>

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>

#include "buffer_list.h"
#include "comm.h"
#include "elements.h"
#include "errors.h"
#include "exchange.h"
#include "reduce_fn.h"
#include "shm_group.h"

namespace hvd_gloo {
namespace {

constexpr size_t kSmallAllreduceBytes = 64 * 1024;

int Invalid(hvd_comm* comm, const char* op, const std::string& what) {
  return Fail(comm, HVD_ERR_INVALID_ARGUMENT, "gloo " + std::string(op) + " (" + Describe(comm) + "): " + what);
}

// The ring's neighbours: data arrives from one and leaves for the other.
std::vector<int32_t> RingNeighbours(const hvd_comm* comm, int32_t from_offset) {
  int32_t from = (comm->rank + from_offset + comm->size) % comm->size;
  int32_t to = (comm->rank - from_offset + comm->size) % comm->size;
  if (from == to) return {from};
  return {from, to};
}

// Gloo's broadcast is a binomial tree rooted at `root`: a member receives from its parent.
int32_t TreeParent(const hvd_comm* comm, int32_t root) {
  int32_t vrank = (comm->rank - root + comm->size) % comm->size;
  int32_t vparent = vrank & (vrank - 1);  // clear the lowest set bit
  return (vparent + root) % comm->size;
}

// While a member would send at most this many bytes in all ((n-1) copies of its buffer),
// allreduce is one exchange round (AllreduceByExchange); above, Gloo's ring. Measured on loopback
// with 2 ranks: the exchange takes half the ring's time from 2 KiB to 64 KiB, and as long at
// 256 KiB. HOROVOD_GLOO_SMALL_ALLREDUCE_BYTES overrides it (0: always the ring).
size_t SmallAllreduceBytes() {
  static const size_t bytes = [] {
    const char* env = std::getenv("HOROVOD_GLOO_SMALL_ALLREDUCE_BYTES");
    return env && *env ? (size_t)std::strtoull(env, nullptr, 10) : kSmallAllreduceBytes;
  }();
  return bytes;
}

}  // namespace

int Allreduce(hvd_comm* comm, const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op) {
  ReduceFn fn = ReduceFunction(dtype, op);
  if (!fn) return Invalid(comm, "allreduce", "unknown dtype or reduce op");
  if (count == 0) return HVD_OK;
  const size_t element_size = hvd::dtype_size(dtype);
  if (comm->size == 1) {
    if (sendbuf != recvbuf) std::memcpy(recvbuf, sendbuf, count * element_size);
    return HVD_OK;
  }
  if (comm->shm) {
    const hvd_buffer_pair whole{sendbuf, recvbuf, count};
    return Guarded(comm, "allreduce", [&] { ShmAllreduce(*comm->shm, BufferList(&whole, 1, element_size), dtype, op, 1.0); });
  }
  if (count * element_size * (size_t)(comm->size - 1) <= SmallAllreduceBytes()) {
    return Guarded(comm, "allreduce", [&] { AllreduceByExchange(comm, sendbuf, recvbuf, count, dtype, op); });
  }
  return Guarded(comm, "allreduce", [&] {
    comm->waiting_on = RingNeighbours(comm, +1);
    gloo::AllreduceOptions opts(comm->context);
    WithElementType(element_size, [&](auto type) {
      using T = decltype(type);
      // In place, Gloo reduces in the output buffer; otherwise it copies each input segment into
      // the output just before that segment is first sent or reduced (no separate full copy).
      if (sendbuf != recvbuf) opts.setInput<T>(static_cast<T*>(const_cast<void*>(sendbuf)), count);
      opts.setOutput<T>(static_cast<T*>(recvbuf), count);
    });
    opts.setReduceFunction(fn);
    // The ring (Gloo's default, and torch's): bandwidth-optimal, 2(n-1)/n of the buffer per rank.
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    gloo::allreduce(opts);
  });
}

int Allgatherv(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype) {
  if (!KnownDtype(dtype)) return Invalid(comm, "allgather", "unknown dtype");
  if (!recvcounts) return Invalid(comm, "allgather", "no receive counts");
  const size_t element_size = hvd::dtype_size(dtype);
  if (Sum(recvcounts, comm->size) == 0) return HVD_OK;
  if (comm->size == 1) {
    if (recvcounts[0]) std::memcpy(recvbuf, sendbuf, recvcounts[0] * element_size);
    return HVD_OK;
  }
  if (comm->shm) {
    return Guarded(comm, "allgather", [&] { ShmAllgatherv(*comm->shm, sendbuf, recvbuf, recvcounts, element_size); });
  }
  return Guarded(comm, "allgather", [&] {
    comm->waiting_on = RingNeighbours(comm, -1);
    gloo::AllgathervOptions opts(comm->context);
    WithElementType(element_size, [&](auto type) {
      using T = decltype(type);
      opts.setInput<T>(static_cast<T*>(const_cast<void*>(sendbuf)), recvcounts[comm->rank]);
      opts.setOutput<T>(static_cast<T*>(recvbuf), std::vector<size_t>(recvcounts, recvcounts + comm->size));
    });
    gloo::allgatherv(opts);
  });
}

int Broadcast(hvd_comm* comm, void* buf, size_t count, hvd_dtype dtype, int32_t root) {
  if (!KnownDtype(dtype)) return Invalid(comm, "broadcast", "unknown dtype");
  if (root < 0 || root >= comm->size) {
    return Invalid(comm, "broadcast", "root " + std::to_string(root) + " is out of range");
  }
  if (count == 0 || comm->size == 1) return HVD_OK;
  if (comm->shm) {
    return Guarded(comm, "broadcast", [&] { ShmBroadcast(*comm->shm, buf, count * hvd::dtype_size(dtype), root); });
  }
  return Guarded(comm, "broadcast", [&] {
    if (comm->rank != root) comm->waiting_on = {TreeParent(comm, root)};
    gloo::BroadcastOptions opts(comm->context);
    WithElementType(hvd::dtype_size(dtype), [&](auto type) {
      using T = decltype(type);
      opts.setOutput<T>(static_cast<T*>(buf), count);  // in place: the root sends from it
    });
    opts.setRoot(root);
    gloo::broadcast(opts);
  });
}

int Barrier(hvd_comm* comm) {
  if (comm->size == 1) return HVD_OK;
  if (comm->shm) return Guarded(comm, "barrier", [&] { ShmBarrier(*comm->shm); });
  return Guarded(comm, "barrier", [&] {
    gloo::BarrierOptions opts(comm->context);
    gloo::barrier(opts);
  });
}

}  // namespace hvd_gloo
