// Small allreduces over TCP as one exchange round plus a local fold (exchange.h).
//
// The engine negotiates with a small allreduce (a bit-vector of a few KiB) on every cycle, and
// small tensors are latency-bound: on loopback TCP, Gloo's ring needs 2(n-1) dependent message
// rounds of tiny segments, each a few syscalls on both sides. Sending the whole buffer to each
// peer costs (n-1) buffers of traffic instead of 2(n-1)/n, irrelevant at these sizes.
#include <cstring>
#include <vector>

#include "horovod/hvd_reduce.hpp"
#include "tcp/exchange.h"
#include "tcp/tcp_transport.h"

namespace hvd_gloo {

void TcpTransport::AllreduceByExchange(const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype,
                                       hvd_reduce_op op) {
  const int32_t n = comm_->size, rank = comm_->rank;
  const size_t bytes = count * hvd::dtype_size(dtype);
  // Slot p holds member p's buffer. This member's own slot is used only in place: the fold writes
  // recvbuf while the sends may still be reading, so they read the copy.
  if (scratch_.size() < (size_t)n * bytes) scratch_.resize((size_t)n * bytes);
  uint8_t* slots = scratch_.data();
  const void* own = sendbuf;
  if (sendbuf == recvbuf) {
    std::memcpy(slots + (size_t)rank * bytes, sendbuf, bytes);
    own = slots + (size_t)rank * bytes;
  }
  std::vector<Transfer> transfers(n);
  for (int32_t p = 0; p < n; ++p) {
    if (p == rank) continue;
    transfers[p] = {own, bytes, slots + (size_t)p * bytes, bytes};
  }
  Exchange(comm_, direct_, kDirect, transfers, [&](int32_t p) {
    const void* block = p == rank ? own : slots + (size_t)p * bytes;
    if (p == 0) {
      std::memcpy(recvbuf, block, bytes);
    } else {
      hvd::reduce_into(dtype, op, recvbuf, block, count);
    }
  });
}

}  // namespace hvd_gloo
