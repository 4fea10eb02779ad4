// Mid-sized allreduces over TCP: a reducescatter (each member folds one block of every member's
// buffer: reducescatter.cc) and then an allgather of the folded blocks, both pairwise exchanges of
// direct transfers (exchange.h). The bytes each member sends are the ring's, 2(n-1)/n of the buffer;
// Gloo's ring moves them in 2(n-1) dependent steps through its pairs (each message waits for its
// receiver's notice, and Gloo's event-loop thread reads it), here in two rounds on connections the
// waiting thread drives. Between two namespace hosts a 4 MiB reducescatter took 2.3 ms and a 4 MiB
// alltoall 2.0 ms, where Gloo's ring took 6.0 ms for a 4 MiB allreduce (BENCHMARKS.md run 29); up
// to 8 MiB (collectives.cc) the two rounds are faster than the ring.
#include <cstring>
#include <vector>

#include "horovod/hvd_reduce.hpp"
#include "tcp/exchange.h"
#include "tcp/tcp_transport.h"

namespace hvd_gloo {

void TcpTransport::AllreduceByScatterGather(const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype,
                                            hvd_reduce_op op) {
  const int32_t n = comm_->size, rank = comm_->rank;
  const size_t element_size = hvd::dtype_size(dtype);
  std::vector<size_t> counts(n), offsets(n);  // each member's block, in elements
  for (int32_t p = 0; p < n; ++p) {
    counts[p] = count / n + ((size_t)p < count % n ? 1 : 0);
    if (p) offsets[p] = offsets[p - 1] + counts[p - 1];
  }
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  uint8_t* own = out + offsets[rank] * element_size;
  const size_t own_bytes = counts[rank] * element_size;
  if (sendbuf == recvbuf) {
    // In place, a peer's share of this member's block would land on the block before it is folded
    // in: fold into space of its own, then copy (1/n of the buffer).
    if (folded_.size() < own_bytes) folded_.resize(own_bytes);
    Reducescatter(sendbuf, folded_.data(), counts.data(), dtype, op);
    std::memcpy(own, folded_.data(), own_bytes);
  } else {
    Reducescatter(sendbuf, own, counts.data(), dtype, op);
  }
  std::vector<Transfer> transfers(n);
  for (int32_t p = 0; p < n; ++p) {
    if (p == rank) continue;
    transfers[p] = {own, own_bytes, out + offsets[p] * element_size, counts[p] * element_size};
  }
  Exchange(comm_, direct_, kDirect, transfers, nullptr);
}

}  // namespace hvd_gloo
