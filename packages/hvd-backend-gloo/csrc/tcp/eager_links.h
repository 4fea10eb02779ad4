// The connections that carry eager messages (tcp/eager.h): one TCP connection per peer and channel,
// of this backend's own, driven by the thread that waits on them.
//
// Why not Gloo's pairs, which carry everything else: with Gloo, a message is written by the thread
// that sends it while it holds the pair's lock, and read by Gloo's event-loop thread, which then
// wakes the thread waiting for it. Eager messages are sent at the start of a cycle by every member
// at once, so each member writes its data while the peer's arrives on the same pair: the loop
// thread, finding the lock held, returns to epoll, which reports the same data again at once, and
// it spins until the write is over (a 128 KiB write between two network namespaces takes 120 to
// 170 us, the receiver's network stack included). Measured across two namespace hosts (256 KiB
// alltoalls, BENCHMARKS.md run 28): each loop thread spun for 9% of the time in runs of 380 us
// (median), taking a core the peer needed, and 30% of the cycles waited 250 us or more for a peer
// record that was already in the socket. Here the waiting thread reads and writes the sockets
// itself: no other thread, no lock, no hand-off, and a message is in its space as soon as its
// bytes are.
//
// Framing: each message is an 8-byte length (native byte order, as Gloo's own headers) and the
// bytes. Each connection carries one channel both ways, so a peer's messages on one channel never
// wait behind another's. A receiver reads a peer's message only while it has space for it (two per
// peer and channel, the engine's protocol never needs more); the rest waits in the kernel, and the
// sender's wait for its write to finish then reads its own incoming messages meanwhile, so two
// members that both wait on each other always progress.
#pragma once

#include <poll.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct hvd_comm;

namespace hvd_gloo {

class EagerLinks {
 public:
  // Connects this member to every peer, one connection per channel, with messages of up to bytes[c]
  // on channel c. Collective: every member calls it alike; listening addresses travel by a Gloo
  // allgather on comm's context, and each member listens on the address its Gloo device listens on
  // (the interface the launcher chose). Throws Failure (errors.h) naming what did not connect.
  EagerLinks(hvd_comm* comm, const std::vector<size_t>& bytes);
  ~EagerLinks();
  EagerLinks(const EagerLinks&) = delete;
  EagerLinks& operator=(const EagerLinks&) = delete;

  int32_t channels() const { return (int32_t)bytes_.size(); }
  size_t bytes(int32_t channel) const { return bytes_[channel]; }
  // A message was sent to `peer` and WaitSent has not returned for it yet (written or not).
  bool sending(int32_t channel, int32_t peer) const { return link(channel, peer).send_unwaited; }
  bool holds(int32_t channel, int32_t peer) const { return link(channel, peer).held; }

  // Starts sending `bytes` from `buf` (valid until WaitSent) to `peer`; writes what the socket takes
  // now and returns.
  void Send(int32_t channel, int32_t peer, const void* buf, size_t bytes);
  // Until the message to `peer` has been written to its socket (it no longer needs `buf`).
  void WaitSent(int32_t channel, int32_t peer);
  // Until the oldest unreleased message from `peer` is here; returns its first byte, valid until
  // Release. Again before Release: the same message.
  const uint8_t* Receive(int32_t channel, int32_t peer);
  // Frees the held message's space for a later one.
  void Release(int32_t channel, int32_t peer);

 private:
  struct Link {
    int fd = -1;
    int32_t channel = 0, peer = 0;
    // Receiving: two spaces, filled in turn; `filled` complete messages from `oldest` on.
    std::array<std::unique_ptr<uint8_t[]>, 2> space;
    int oldest = 0, filled = 0;
    bool held = false;  // Receive returned the oldest message and Release has not freed it yet
    uint64_t header = 0;
    size_t header_got = 0, payload_got = 0;
    // Sending: at most one message at a time, from Send until WaitSent.
    bool send_unwaited = false;
    bool send_active = false;  // bytes still to write
    uint64_t send_header = 0;
    const uint8_t* send_buf = nullptr;
    size_t send_bytes = 0, send_done = 0;  // send_done counts the header too
    // Set once the connection failed or the peer closed it; reported only to a wait that needs it.
    std::string closed;
  };

  Link& link(int32_t channel, int32_t peer) { return links_[(size_t)channel * size_ + peer]; }
  const Link& link(int32_t channel, int32_t peer) const { return links_[(size_t)channel * size_ + peer]; }
  void Connect(const std::vector<size_t>& bytes);
  // Reads what `l` has for its free space, writes what it has to send; never blocks.
  void Service(Link& l);
  void ReadSome(Link& l);
  void WriteSome(Link& l);
  // Services every link until done() holds, waiting in poll() in between; `l` is the link waited
  // on (its failure or the timeout is reported, naming its peer, for operation `op`).
  template <typename Done>
  void Progress(Link& l, const char* op, Done done);

  hvd_comm* comm_;
  int32_t size_ = 0;
  std::vector<size_t> bytes_;
  std::vector<Link> links_;  // channel-major; this member's own entries unused
  // Progress's poll set, kept between waits: a record is waited for every cycle.
  std::vector<pollfd> poll_fds_;
  std::vector<Link*> polled_;
};

}  // namespace hvd_gloo
