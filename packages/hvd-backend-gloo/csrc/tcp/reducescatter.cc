// Reducescatter over TCP: a pairwise exchange of the blocks, then a local reduction in rank order.
//
// Why not Gloo: its reduce_scatter.h is an old-style algorithm object (ReduceScatterHalvingDoubling)
// templated on the element type, that registers its own buffers at construction, which would have
// to be done per call (buffer shapes change between calls). The two simple correct options:
//  - allreduce the whole buffer, keep the own block: each member sends 2(n-1)/n of the buffer;
//  - send every other member its block, reduce the n blocks of one's own: each member sends
//    (n-1)/n of the buffer, half as much, for the same (n-1) blocks' worth of reduction.
// For large tensors the bytes on the wire dominate, so this file does the second. It costs a
// scratch space of (n-1) own-sized blocks, kept in the transport between calls. Blocks are
// folded in rank order as they arrive, so the reduction overlaps the later transfers, and every
// member reduces in the same order as the other backends' reference (rank 0 first).
#include <cstring>
#include <vector>

#include "horovod/hvd_reduce.hpp"
#include "tcp/exchange.h"
#include "tcp/tcp_transport.h"

namespace hvd_gloo {
void TcpTransport::Reducescatter(const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                                 hvd_reduce_op op) {
  const int32_t n = comm_->size, rank = comm_->rank;
  const size_t element_size = hvd::dtype_size(dtype);
  const size_t own = recvcounts[rank], own_bytes = own * element_size;
  const uint8_t* send = static_cast<const uint8_t*>(sendbuf);
  std::vector<size_t> offsets(n);  // in bytes, of each member's block in sendbuf
  for (int32_t p = 1; p < n; ++p) offsets[p] = offsets[p - 1] + recvcounts[p - 1] * element_size;

  // Rank 0's block of this member's slice arrives straight into recvbuf (the fold starts from it);
  // peer p >= 1 uses scratch slot p - 1.
  if (scratch_.size() < (size_t)(n - 1) * own_bytes) scratch_.resize((size_t)(n - 1) * own_bytes);
  auto block_of = [&](int32_t p) -> const void* {
    if (p == rank) return send + offsets[rank];
    if (p == 0) return recvbuf;
    return scratch_.data() + (size_t)(p - 1) * own_bytes;
  };
  std::vector<Transfer> transfers(n);
  for (int32_t p = 0; p < n; ++p) {
    if (p == rank) continue;
    transfers[p].send = send + offsets[p];
    transfers[p].send_bytes = recvcounts[p] * element_size;
    transfers[p].recv = const_cast<void*>(block_of(p));
    transfers[p].recv_bytes = own_bytes;
  }
  Exchange(comm_, direct_, kDirect, transfers, [&](int32_t p) {
    if (own == 0) return;
    if (p == 0) {
      if (rank == 0) std::memcpy(recvbuf, send + offsets[0], own_bytes);  // else it arrived there
    } else {
      hvd::reduce_into(dtype, op, recvbuf, block_of(p), own);
    }
  });
}

}  // namespace hvd_gloo
