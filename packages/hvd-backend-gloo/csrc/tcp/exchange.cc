// The pairwise exchange (exchange.h).
//
// Waiting on one peer at a time lets a failure name the peer that did not deliver; every wait reads
// and writes all the connections, so the order costs nothing.
#include "tcp/exchange.h"

namespace hvd_gloo {

void Exchange(hvd_comm* comm, Links& links, int32_t channel, const std::vector<Transfer>& transfers,
              const std::function<void(int32_t)>& arrived, const std::function<void()>& posted) {
  const int32_t n = comm->size, rank = comm->rank;
  const auto deadline = links.Deadline();
  for (int32_t i = 1; i < n; ++i) {  // staggered, so that not every member sends to rank 0 first
    const int32_t to = (rank + i) % n, from = (rank - i + n) % n;
    const Transfer& in = transfers[from];
    if (in.recv_bytes) links.PostReceive(channel, from, in.recv, in.recv_bytes);
    const Transfer& out = transfers[to];
    if (out.send_bytes) links.Send(channel, to, out.send, out.send_bytes);
  }
  if (posted) posted();
  for (int32_t p = 0; p < n; ++p) {
    if (p != rank && transfers[p].recv_bytes) {
      comm->waiting_on = {p};
      links.WaitReceived(channel, p, deadline);
    }
    if (arrived) arrived(p);
  }
  for (int32_t p = 0; p < n; ++p) {
    if (p != rank && transfers[p].send_bytes) {
      comm->waiting_on = {p};
      links.WaitSent(channel, p, deadline);
    }
  }
  comm->waiting_on.clear();
}

}  // namespace hvd_gloo
