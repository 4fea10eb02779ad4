// A pairwise exchange between every two members, on Gloo's unbound buffers: the transport of
// alltoallv and reducescatter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "comm.h"

namespace hvd_gloo {

// What this member sends to and receives from one peer.
struct Transfer {
  const void* send = nullptr;
  size_t send_bytes = 0;
  void* recv = nullptr;
  size_t recv_bytes = 0;
};

// Posts every send and receive at once (transfers[p] for peer p; the entry for this member is
// ignored), then waits for the receives in rank order, calling arrived(p) for every member p in
// rank order (this member included) once p's data is there, and finally for the sends. Zero-byte
// transfers are skipped on both sides: both know the length. The whole exchange is bounded by the
// communicator's timeout. Throws what Gloo throws; `slot_prefix` keeps exchanges of different
// collectives apart.
void Exchange(hvd_comm* comm, uint8_t slot_prefix, const std::vector<Transfer>& transfers,
              const std::function<void(int32_t)>& arrived);

}  // namespace hvd_gloo

namespace hvd_gloo {

// Allreduce for small buffers (allreduce_small.cc): every member sends its whole buffer to every
// other member at once and folds the n buffers in rank order. One round of messages instead of
// the ring's 2(n-1) dependent steps; every member folds in the same order, so all results are
// bitwise equal. Throws what Gloo throws.
void AllreduceByExchange(hvd_comm* comm, const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype,
                         hvd_reduce_op op);

}  // namespace hvd_gloo
