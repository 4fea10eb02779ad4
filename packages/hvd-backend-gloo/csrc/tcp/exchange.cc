// The pairwise exchange (exchange.h).
//
// Waiting on one peer at a time lets a failure name the peer that did not deliver.
#include "tcp/exchange.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

namespace hvd_gloo {
namespace {

std::chrono::milliseconds Left(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  // At least 1 ms: Gloo reads -1 ms as "use the context's default timeout".
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

void Exchange(hvd_comm* comm, uint8_t slot_prefix, const std::vector<Transfer>& transfers,
              const std::function<void(int32_t)>& arrived, const std::function<void()>& posted) {
  const int32_t n = comm->size, rank = comm->rank;
  const auto deadline = std::chrono::steady_clock::now() + comm->timeout;
  const uint64_t slot = gloo::Slot::build(slot_prefix, 0);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends(n), recvs(n);
  for (int32_t i = 1; i < n; ++i) {  // staggered, so that not every member sends to rank 0 first
    int32_t to = (rank + i) % n, from = (rank - i + n) % n;
    // The send before the receive, as Gloo's own alltoallv posts them. Receive first, the 256 KiB
    // to 1 MiB exchanges between two hosts had a heavy tail (a 75th percentile of 1.5 to 3.7 ms
    // per alltoall, against 0.46 to 0.51 ms this way: BENCHMARKS.md, run 18).
    const Transfer& out = transfers[to];
    if (out.send_bytes) {
      sends[to] = comm->context->createUnboundBuffer(const_cast<void*>(out.send), out.send_bytes);
      sends[to]->send(to, slot);
    }
    const Transfer& in = transfers[from];
    if (in.recv_bytes) {
      recvs[from] = comm->context->createUnboundBuffer(in.recv, in.recv_bytes);
      recvs[from]->recv(from, slot);
    }
  }
  if (posted) posted();
  for (int32_t p = 0; p < n; ++p) {
    if (recvs[p]) {
      comm->waiting_on = {p};
      recvs[p]->waitRecv(Left(deadline));
    }
    if (arrived) arrived(p);
  }
  for (int32_t p = 0; p < n; ++p) {
    if (sends[p]) {
      comm->waiting_on = {p};
      sends[p]->waitSend(Left(deadline));
    }
  }
  comm->waiting_on.clear();
}

}  // namespace hvd_gloo
