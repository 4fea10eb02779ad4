// Eager messages (hvd_backend_ext_v1's eager_* functions) over TCP.
//
// A member's message leaves at once, into space its peer keeps for two messages per channel, and
// crosses the network while the engine negotiates (or is the negotiation: the engine's records
// travel on a channel of their own). Two per peer and channel: the engine may send a peer its next
// message as soon as the last one's op has run, which is before that peer has released it. The
// messages go on connections of this backend's own, not on Gloo's pairs (links.h says why).
// Only communicators whose collectives go over TCP open them; on shared memory the data movement
// costs less than the copy out of this space would.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tcp/links.h"

struct hvd_comm;

namespace hvd_gloo {

int EagerOpen(hvd_comm* comm, const size_t* bytes, int32_t channels);
int EagerSend(hvd_comm* comm, int32_t channel, int32_t peer, const void* buf, size_t bytes);
int EagerWaitSent(hvd_comm* comm, int32_t channel, int32_t peer);
int EagerReceive(hvd_comm* comm, int32_t channel, int32_t peer, const void** data);
int EagerRelease(hvd_comm* comm, int32_t channel, int32_t peer);
int EagerReceiveInto(hvd_comm* comm, int32_t channel, int32_t peer, void* dst, size_t bytes);

// Before the communicator is destroyed: closes the connections and frees the space.
void EagerClose(hvd_comm* comm);

}  // namespace hvd_gloo
