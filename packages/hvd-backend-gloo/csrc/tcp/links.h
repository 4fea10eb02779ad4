// TCP connections of this backend's own, one per peer and channel, driven by the thread that waits
// on them. Two kinds of channel:
//  - with space (the eager messages of tcp/eager.h): a peer's message lands in room this member
//    keeps for two messages per peer, whenever it arrives, and is read from there;
//  - direct (the TCP transport's broadcast and pairwise exchanges): a receive names the memory the
//    message goes to, and the bytes land there, with no copy.
//
// Why not Gloo's pairs, which carry everything else: Gloo's event-loop thread reads a message and
// then wakes the thread waiting for it, and while a sender holds a pair's lock for its write, that
// loop thread spins on the pair's incoming data (every member sends at the start of a cycle),
// taking a core the peer needs. Here the waiting thread reads and writes the sockets itself: no
// other thread, no lock, no hand-off, and a message is where it goes as soon as its bytes are.
// Measured: benchmarks/results/run-28-eager-messages.md and run-29-direct-transfers.md.
//
// Framing: each message is an 8-byte length (native byte order, as Gloo's own headers) and the
// bytes. Each connection carries one channel both ways, so a peer's messages on one channel never
// wait behind another's. A receiver reads a peer's message only while it has room for it (space:
// two per peer and channel, the engine's protocol never needs more; direct: a posted receive); the
// rest waits in the kernel, and the sender's wait for its write to finish then reads its own
// incoming messages meanwhile, so two members that both wait on each other always progress.
#pragma once

#include <poll.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

struct hvd_comm;

namespace hvd_gloo {

class Links {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects this member to every peer, one connection per channel: channel c holds messages of up
  // to bytes[c], or is direct for bytes[c] == 0. Collective: every member calls it alike; listening addresses travel by
  // a Gloo allgather on comm's context, and each member listens on the address its Gloo device listens on (the
  // interface the launcher chose). Throws Failure (errors.h) naming what did not connect.
  Links(hvd_comm* comm, const std::vector<size_t>& bytes);
  ~Links();
  Links(const Links&) = delete;
  Links& operator=(const Links&) = delete;

  int32_t channels() const { return (int32_t)bytes_.size(); }
  size_t bytes(int32_t channel) const { return bytes_[channel]; }
  // A message was sent to `peer` and WaitSent has not returned for it yet (written or not).
  bool sending(int32_t channel, int32_t peer) const { return link(channel, peer).send_unwaited; }
  bool holds(int32_t channel, int32_t peer) const { return link(channel, peer).held; }

  // The time by which a wait that starts now must end: the communicator's timeout.
  Clock::time_point Deadline() const;

  // Starts sending `bytes` (at least 1) from `buf` (valid until WaitSent) to `peer`; writes what the
  // socket takes now and returns.
  void Send(int32_t channel, int32_t peer, const void* buf, size_t bytes);
  // Until the message to `peer` has been written to its socket (it no longer needs `buf`).
  void WaitSent(int32_t channel, int32_t peer, Clock::time_point deadline);
  void WaitSent(int32_t channel, int32_t peer) { WaitSent(channel, peer, Deadline()); }

  // Direct channels: the next message from `peer` goes to `dst`, which it must fill exactly (`bytes`,
  // at least 1; a message of another length fails the connection, naming both lengths). `dst` stays
  // in use until WaitReceived returns; one receive per peer and channel at a time.
  void PostReceive(int32_t channel, int32_t peer, void* dst, size_t bytes);
  // Until the posted message from `peer` is in its destination.
  void WaitReceived(int32_t channel, int32_t peer, Clock::time_point deadline);

  // Without waiting: whether the message sent to `peer` is written whole (it is then waited for,
  // as by WaitSent), and whether the posted receive from `peer` is in its destination.
  bool Sent(int32_t channel, int32_t peer);
  bool Received(int32_t channel, int32_t peer) const { return !link(channel, peer).recv_posted; }
  // Services every link until step() returns true or `deadline` passes; step() runs after each
  // round of reads and writes and may post receives and start sends. A failure of the link to
  // `peer` on `channel`, or the timeout, is reported naming `peer`, for `op` ("send", "receive").
  void WaitUntil(int32_t channel, int32_t peer, const char* op, Clock::time_point deadline,
                 const std::function<bool()>& step);

  // Channels with space:
  // Until the oldest unreleased message from `peer` is here; returns its first byte, valid until
  // Release. Again before Release: the same message.
  const uint8_t* Receive(int32_t channel, int32_t peer);
  // Frees the held message's space for a later one.
  void Release(int32_t channel, int32_t peer);
  // Receive, a copy of its `bytes` (the message's whole length) to `dst`, and Release, in one: the
  // part of the message not yet here when it is called is read straight into `dst`. Not while a
  // message from `peer` is held.
  void ReceiveInto(int32_t channel, int32_t peer, void* dst, size_t bytes);

 private:
  struct Link {
    int fd = -1;
    int32_t channel = 0, peer = 0;
    // Receiving, with space: two spaces, filled in turn; `filled` complete messages from `oldest` on.
    std::array<std::unique_ptr<uint8_t[]>, 2> space;
    std::array<uint64_t, 2> lengths{};  // of the messages in them
    int oldest = 0, filled = 0;
    bool held = false;  // Receive returned the oldest message and Release has not freed it yet
    // A posted receive: where the next message goes (direct: PostReceive; with space: ReceiveInto,
    // for the oldest message, while none is complete), until it is all there.
    uint8_t* recv_dst = nullptr;
    size_t recv_bytes = 0;
    bool recv_posted = false;
    // The message being read: its length, then its bytes.
    uint64_t header = 0;
    size_t header_got = 0, payload_got = 0;
    int low_water = 1;  // the socket's SO_RCVLOWAT (SetLowWater)
    // Sending: at most one message at a time, from Send until WaitSent.
    bool send_unwaited = false;
    bool send_active = false;  // bytes still to write
    uint64_t send_header = 0;
    const uint8_t* send_buf = nullptr;
    size_t send_bytes = 0, send_done = 0;  // send_done counts the header too
    // Set once the connection failed or the peer closed it; reported only to a wait that needs it,
    // with this status.
    std::string closed;
    int closed_status = 0;  // set with `closed` (Fail)
  };

  Link& link(int32_t channel, int32_t peer) { return links_[(size_t)channel * size_ + peer]; }
  const Link& link(int32_t channel, int32_t peer) const { return links_[(size_t)channel * size_ + peer]; }
  bool direct(const Link& l) const { return bytes_[l.channel] == 0; }
  // Whether `l` has room for what its peer sends next (space free, or a receive posted; with space,
  // a posted receive implies none is complete, so `filled` is 0).
  bool ready_to_read(const Link& l) const { return direct(l) ? l.recv_posted : l.filled < 2; }
  void Connect(const std::vector<size_t>& bytes);
  // "eager messages" or "direct transfers", for set-up failures.
  std::string Purpose() const;
  // Reads what `l` has room for, writes what it has to send; never blocks.
  void Service(Link& l);
  void ReadSome(Link& l);
  // A message's length is known: false (and the connection failed) when `l` has no room for it.
  bool AcceptLength(Link& l);
  // Before a wait on `l`: poll() wakes for a large message's bytes in chunks, else at once.
  void SetLowWater(Link& l);
  void WriteSome(Link& l);
  // The connection can no longer be used: says why to the wait that needs it, and shuts it down so
  // that the peer's waits on it end too.
  void Fail(Link& l, int status, std::string why);
  // The peer sent `sent` bytes where this member's receive takes `expected`.
  void Mismatch(Link& l, uint64_t sent, size_t expected);
  // Reports `l`'s failure to a wait doing `op`.
  [[noreturn]] void Throw(const Link& l, const char* op) const;
  // "eager receive on channel 1", "send of a direct transfer": what a wait on `l` was doing.
  std::string Waiting(const Link& l, const char* op) const;
  // Services every link until done() holds or `deadline` passes, waiting in poll() in between; `l`
  // is the link waited on (its failure or the timeout is reported, naming its peer, for `op`). A
  // failure of another link with a receive posted or a send under way is reported at once too,
  // naming that link's peer (comm->waiting_on): that transfer can no longer finish.
  template <typename Done>
  void Progress(Link& l, const char* op, Clock::time_point deadline, Done done);

  hvd_comm* comm_;
  int32_t size_ = 0;
  std::vector<size_t> bytes_;
  std::vector<Link> links_;  // channel-major; this member's own entries unused
  // Progress's poll set, kept between waits: a record is waited for every cycle.
  std::vector<pollfd> poll_fds_;
  std::vector<Link*> polled_;
};

}  // namespace hvd_gloo
