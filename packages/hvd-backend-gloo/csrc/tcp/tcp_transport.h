// The transport of members on several hosts (or with shared memory turned off), over TCP: Gloo's
// ring algorithms on the communicator's Gloo context, and direct transfers on connections of the
// transport's own (links.h) where one member's data goes to another whole.
//
//  - allreduce: one exchange round up to 2 MiB (allreduce_small.cc), above that a pipelined
//    reducescatter and allgather of direct transfers (allreduce_pipelined.cc);
//  - allgatherv, barrier: Gloo's own (collectives.cc);
//  - the multi-buffer allreduce: packed into one buffer for Gloo's ring (allreduce_buffers.cc);
//  - broadcast: a binomial tree of direct transfers (broadcast.cc);
//  - alltoallv and reducescatter: a pairwise exchange that skips empty blocks (exchange.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm.h"
#include "tcp/links.h"
#include "transport.h"

namespace hvd_gloo {

class TcpTransport final : public Transport {
 public:
  // Connects the direct connections too (collective: every member creates its transport alike).
  explicit TcpTransport(hvd_comm* comm);

  const char* name() const override { return "tcp"; }
  bool OverNetwork() const override { return true; }

  void Allreduce(const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op) override;
  void AllreduceBuffers(const hvd_common::BufferList& buffers, hvd_dtype dtype, hvd_reduce_op op,
                        double postscale) override;
  void Allgatherv(const void* sendbuf, void* recvbuf, const size_t* recvcounts, size_t element_size) override;
  void Broadcast(void* buf, size_t count, size_t element_size, int32_t root) override;
  void Alltoallv(const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
                 size_t element_size) override;
  void Reducescatter(const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                     hvd_reduce_op op) override;
  void Barrier() override;

 private:
  // Every member sends its whole buffer to every other member at once and folds the n buffers in
  // rank order (allreduce_small.cc). One round of messages instead of the ring's 2(n-1) dependent
  // steps; every member folds in the same order, so all results are bitwise equal.
  void AllreduceByExchange(const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op);
  // A reducescatter and an allgather of direct transfers, in segments, pipelined
  // (allreduce_pipelined.cc): the ring's bytes, without its per-step hand-offs.
  void AllreducePipelined(const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op);

  hvd_comm* comm_;
  // The direct connections: one channel, kDirect, to every peer.
  static constexpr int32_t kDirect = 0;
  Links direct_;
  // Receive space of reducescatter and of the allreduces, kept between calls (grow-only).
  std::vector<uint8_t> scratch_;
  // Where a multi-buffer allreduce packs its buffers (the allreduce it then runs may use
  // `scratch_`), kept between calls (grow-only).
  std::vector<uint8_t> packed_;
};

}  // namespace hvd_gloo
