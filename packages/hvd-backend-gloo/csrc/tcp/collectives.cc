// The collectives Gloo implements itself, on the TCP transport: allreduce, allgatherv, barrier.
//
// Each one is Gloo's unbound-buffer algorithm driven the way torch.distributed's ProcessGroupGloo
// drives it (options object, then gloo::allreduce/allgatherv/...), directly on the caller's
// buffers: no staging copies. Allreduce chooses: small ones take one exchange round
// (allreduce_small.cc), larger ones a pipelined reducescatter and allgather
// (allreduce_pipelined.cc); Gloo's ring only where HOROVOD_GLOO_RING_ALLREDUCE_BYTES asks for it.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>

#include "common/reduce_fn.h"
#include "horovod/hvd_reduce.hpp"
#include "tcp/element_type.h"
#include "tcp/tcp_transport.h"

namespace hvd_gloo {
namespace {

constexpr size_t kExchangeAllreduceBytes = 2u << 20;
constexpr size_t kPipelinedAllreduceBytes = SIZE_MAX;

// The ring's neighbours: data arrives from one and leaves for the other.
std::vector<int32_t> RingNeighbours(const hvd_comm* comm, int32_t from_offset) {
  int32_t from = (comm->rank + from_offset + comm->size) % comm->size;
  int32_t to = (comm->rank - from_offset + comm->size) % comm->size;
  if (from == to) return {from};
  return {from, to};
}

// Allreduce is one exchange round (AllreduceByExchange: each member sends its whole buffer to every
// other) while a member's buffer is at most this many bytes times n/2 / (n-1), and Gloo's ring above.
// The exchange sends (n-1) x the buffer, the ring 2(n-1)/n x, that is n/2 times less, but in 2(n-1)
// steps that each wait for the peer to be ready: for mid-sized buffers those waits cost more than
// the extra bytes (benchmarks/results/run-14-across-hosts.md). HOROVOD_GLOO_SMALL_ALLREDUCE_BYTES
// overrides the limit (0: always the ring).
size_t ExchangeAllreduceBytes() {
  static const size_t bytes = [] {
    const char* env = std::getenv("HOROVOD_GLOO_SMALL_ALLREDUCE_BYTES");
    return env && *env ? (size_t)std::strtoull(env, nullptr, 10) : kExchangeAllreduceBytes;
  }();
  return bytes;
}

bool ByExchange(size_t buffer_bytes, int32_t members) {
  // buffer x (n-1) <= limit x n/2, in integers
  return buffer_bytes * 2 * (size_t)(members - 1) <= ExchangeAllreduceBytes() * (size_t)members;
}

// An allreduce that is not small is pipelined on the direct connections (allreduce_pipelined.cc),
// up to this many bytes per member's buffer, and Gloo's ring above it: by default no limit, since
// the pipeline beat the ring at every size measured (benchmarks/results/run-30-pipelined-allreduce.md).
// HOROVOD_GLOO_RING_ALLREDUCE_BYTES sets a limit (0: the ring for everything that is not small).
size_t PipelinedAllreduceBytes() {
  static const size_t bytes = [] {
    const char* env = std::getenv("HOROVOD_GLOO_RING_ALLREDUCE_BYTES");
    return env && *env ? (size_t)std::strtoull(env, nullptr, 10) : kPipelinedAllreduceBytes;
  }();
  return bytes;
}

}  // namespace

void TcpTransport::Allreduce(const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op) {
  const size_t element_size = hvd::dtype_size(dtype);
  if (ByExchange(count * element_size, comm_->size)) {
    AllreduceByExchange(sendbuf, recvbuf, count, dtype, op);
    return;
  }
  if (count * element_size <= PipelinedAllreduceBytes()) {
    AllreducePipelined(sendbuf, recvbuf, count, dtype, op);
    return;
  }
  comm_->waiting_on = RingNeighbours(comm_, +1);
  gloo::AllreduceOptions opts(comm_->context);
  WithElementType(element_size, [&](auto type) {
    using T = decltype(type);
    // In place, Gloo reduces in the output buffer; otherwise it copies each input segment into
    // the output just before that segment is first sent or reduced (no separate full copy).
    if (sendbuf != recvbuf) opts.setInput<T>(static_cast<T*>(const_cast<void*>(sendbuf)), count);
    opts.setOutput<T>(static_cast<T*>(recvbuf), count);
  });
  opts.setReduceFunction(hvd_common::ReduceFunction(dtype, op));
  // The ring (Gloo's default, and torch's): bandwidth-optimal, 2(n-1)/n of the buffer per rank.
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  gloo::allreduce(opts);
}

void TcpTransport::Allgatherv(const void* sendbuf, void* recvbuf, const size_t* recvcounts, size_t element_size) {
  comm_->waiting_on = RingNeighbours(comm_, -1);
  gloo::AllgathervOptions opts(comm_->context);
  WithElementType(element_size, [&](auto type) {
    using T = decltype(type);
    opts.setInput<T>(static_cast<T*>(const_cast<void*>(sendbuf)), recvcounts[comm_->rank]);
    opts.setOutput<T>(static_cast<T*>(recvbuf), std::vector<size_t>(recvcounts, recvcounts + comm_->size));
  });
  gloo::allgatherv(opts);
}

void TcpTransport::Barrier() {
  gloo::BarrierOptions opts(comm_->context);
  gloo::barrier(opts);
}

}  // namespace hvd_gloo
