// A pairwise exchange between every two members, on the TCP transport's direct connections
// (links.h): how the TCP transport moves alltoallv, reducescatter and small allreduces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "comm.h"
#include "tcp/links.h"

namespace hvd_gloo {

// What this member sends to and receives from one peer.
struct Transfer {
  const void* send = nullptr;
  size_t send_bytes = 0;
  void* recv = nullptr;
  size_t recv_bytes = 0;
};

// Posts every send and receive at once (transfers[p] for peer p; the entry for this member is
// ignored) on `channel` of `links`, a direct one, and calls posted(), work of this member's own that
// overlaps the transfers. Then waits for the receives in rank order, calling arrived(p) for every
// member p in rank order (this member included) once p's data is there, and finally for the sends.
// Either callback may be empty. Zero-byte transfers are skipped on both sides: both know the
// length. The whole exchange is bounded by the communicator's timeout; failures throw (links.h).
void Exchange(hvd_comm* comm, Links& links, int32_t channel, const std::vector<Transfer>& transfers,
              const std::function<void(int32_t)>& arrived, const std::function<void()>& posted = {});

}  // namespace hvd_gloo
