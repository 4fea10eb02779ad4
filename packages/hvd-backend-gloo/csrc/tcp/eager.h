// Eager messages (hvd_backend_ext_v1's eager_* functions) on Gloo's TCP pairs.
//
// Gloo's TCP transport writes an unbound buffer's data as soon as the receiver's "ready" notice for
// its slot has arrived; until then the send waits. So each member keeps receives posted for every
// peer, on a slot of its own, into space of the size the engine asked for: a peer's message then
// leaves at once and crosses the network while the engine negotiates (or is the negotiation: the
// engine's records travel on a channel of their own). Two per peer and channel: the engine may
// send a peer its next message as soon as the last one's op has run, which is before that peer
// has released it and posted its receive again; with one, the next message would wait for that
// "ready" notice (a network round, back to back ops paid it each time). Messages from a peer fill
// its receives in the order they were posted (Gloo matches them first come, first served), so the
// oldest unreleased message is always in the receive posted longest ago. Only communicators whose
// collectives go over TCP open it; on shared memory the data movement costs less than the copy out
// of this space would.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include <gloo/transport/unbound_buffer.h>

struct hvd_comm;

namespace hvd_gloo {

// One channel's (each has its own Gloo slot).
struct EagerSpace {
  static constexpr int kPerPeer = 2;
  struct Receive {
    std::unique_ptr<uint8_t[]> space;  // where the message lands
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;  // always posted, but while held
    // Why posting it again after a release failed: the peer's connection is gone. That is no
    // failure of the message just released, and none at all when no further message is awaited
    // (a peer that ran its last cycle of a communicator and destroyed it, as members of a removed
    // process set do, closes the connection while the others release its last message); the
    // receive that waits here next reports it.
    std::exception_ptr unposted;
  };
  size_t bytes = 0;  // per receive
  std::vector<std::array<Receive, kPerPeer>> receives;  // per peer
  std::vector<int> oldest;     // per peer: the receive its next (or held) message is in
  std::vector<bool> arrived;   // per peer: that message was waited for and is not yet released
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends;  // per peer: in flight
};

int EagerOpen(hvd_comm* comm, const size_t* bytes, int32_t channels);
int EagerSend(hvd_comm* comm, int32_t channel, int32_t peer, const void* buf, size_t bytes);
int EagerWaitSent(hvd_comm* comm, int32_t channel, int32_t peer);
int EagerReceive(hvd_comm* comm, int32_t channel, int32_t peer, const void** data);
int EagerRelease(hvd_comm* comm, int32_t channel, int32_t peer);

// Before the communicator is destroyed: closes its TCP pairs, then frees the eager space. The
// receives are always posted, so a peer that leaves first has Gloo's device thread signal its
// departure to them, and that can happen while this member frees them. Gloo makes the buffer's
// destructor wait for that thread through a use count inside libgloo, which ThreadSanitizer
// cannot see (libgloo is not instrumented); closing a pair first (Gloo's own soft close, as its
// destructor does: data already sent is still delivered) takes the pair's lock and stops the
// device thread from calling into it, an ordering that holds and that ThreadSanitizer sees.
void EagerClose(hvd_comm* comm);

}  // namespace hvd_gloo
