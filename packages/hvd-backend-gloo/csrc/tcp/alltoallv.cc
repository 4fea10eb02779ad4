// Alltoallv over TCP: the pairwise exchange of the blocks (exchange.h).
//
// Not gloo::alltoallv: that one sends and waits for a message to and from every peer, also for
// empty blocks; an exchange that skips empty blocks needs no message at all for them.
#include <cstring>
#include <vector>

#include "tcp/exchange.h"
#include "tcp/tcp_transport.h"

namespace hvd_gloo {
void TcpTransport::Alltoallv(const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
                             size_t element_size) {
  const int32_t n = comm_->size, rank = comm_->rank;
  std::vector<Transfer> transfers(n);
  size_t send_offset = 0, recv_offset = 0;
  for (int32_t p = 0; p < n; ++p) {
    transfers[p].send = static_cast<const uint8_t*>(sendbuf) + send_offset;
    transfers[p].send_bytes = sendcounts[p] * element_size;
    transfers[p].recv = static_cast<uint8_t*>(recvbuf) + recv_offset;
    transfers[p].recv_bytes = recvcounts[p] * element_size;
    send_offset += transfers[p].send_bytes;
    recv_offset += transfers[p].recv_bytes;
  }
  // This member's own block is copied once the exchange has posted every send and receive, while
  // the peers' blocks travel: not when its turn in rank order comes, after the lower ranks' blocks
  // have arrived, which put the whole copy after the transfer on every member but rank 0 (and a
  // collective takes as long as its slowest member).
  const Transfer& own = transfers[rank];
  Exchange(comm_, direct_, kDirect, transfers, nullptr, [&] {
    if (own.send_bytes) std::memcpy(own.recv, own.send, own.send_bytes);
  });
}

}  // namespace hvd_gloo
