// Eager messages: a process set member's data for a cached op, sent before negotiation says the op
// runs, so that the data crosses the network while the op is negotiated; and the negotiation records
// themselves, on a channel of their own.
//
// Over TCP a collective's data otherwise waits for the negotiation round, which torch.distributed
// does not pay (benchmarks/results/run-20-more-repetitions.md). Each member keeps a receive posted for
// every peer, into space its backend owns (hvd_backend_ext_v1's eager_* functions), so a message
// can be sent at any time and never waits for its receiver.
//
// The protocol, on every member alike (controller.cc and executor.cc):
//  - A member sends when it has a cached op ready whose data it sends to every peer and which does
//    not travel inline with negotiation: a broadcast it is the root of, or an alltoall whose blocks
//    for its peers are all non-empty, each no larger than the space. At most one op's messages are
//    outstanding per member, one message to each peer; the member's negotiation record names that
//    op's cache slot every cycle until they are settled, so every member knows what is in its space.
//  - A message is settled in the cycle its slot runs (the executor takes it into the output, and
//    the op skips that part of its backend call) or loses its slot (an erased or replaced cache
//    slot: the receivers drop it, and the sender's entry goes the usual way).
//  - Settling releases the receiver's space and waits, on the sender, until the message has left
//    the sender's tensor, so that an entry never completes while its data is still being read.
//
// Negotiation records (controller.cc's step 1) go the same way, on the other channel: each member
// sends its record to every peer and takes theirs, instead of an allgather. Over TCP that is one
// network crossing per cycle instead of two (an allgather's receive first tells the sender it is
// ready, and only then do the bytes move), which every op pays. A member sends its next record
// only after taking every peer's last, so a peer never has more than two unreleased.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend_loader.h"

namespace hvdcore {

// One channel of eager messages on a communicator: each member's messages to each peer, received
// in the order they were sent.
class EagerChannel {
 public:
  // What this member sends to one peer.
  struct Part {
    const void* data = nullptr;
    size_t bytes = 0;
  };

  // Messages of up to `capacity` bytes on channel `channel` of `comm`, which OpenEager opened.
  void Bind(Comm* comm, int32_t channel, size_t capacity) {
    comm_ = comm;
    channel_ = channel;
    capacity_ = capacity;
  }
  // 0 while the channel is closed.
  size_t capacity() const { return capacity_; }

  // The cache slot whose messages this member has outstanding, -1 when none (the data channel's
  // protocol, above; the records channel does not use it).
  int32_t sent_slot() const { return sent_slot_; }
  // Sends parts[p] to every other member p (1 to capacity() bytes each), for the op in `slot`.
  Status Send(int32_t slot, const std::vector<Part>& parts);
  // This member's messages were taken or dropped: waits until they have left its memory.
  Status Settle();
  // The oldest message from `peer`, `bytes` long: lands in `dst` (the part still on its way straight
  // there, where the backend can), or is dropped when dst is null; its space is freed for a later
  // one.
  Status Take(int32_t peer, void* dst, size_t bytes);
  // The same, lending the message where it lies to `read` (a callable taking `const uint8_t*` and
  // returning Status) instead, for a message whose length only its content tells (the channel's
  // messages carry none); `read`'s refusal is the result. The space is freed whatever `read` says.
  // A template, not a std::function: the records channel takes one message per peer every cycle,
  // and a std::function holding a lambda with several captures allocates each time.
  template <typename Read>
  Status Take(int32_t peer, Read&& read) {
    const void* data = nullptr;
    Status st = comm_->EagerReceive(channel_, peer, &data);
    if (!st.ok()) return st;
    Status got = read(static_cast<const uint8_t*>(data));
    st = comm_->EagerRelease(channel_, peer);
    return got.ok() ? st : got;
  }

 private:
  Comm* comm_ = nullptr;
  int32_t channel_ = 0;
  size_t capacity_ = 0;
  int32_t sent_slot_ = -1;
};

// Opens `comm`'s eager messages, on every member alike, with a channel for negotiation records of up
// to `record_bytes` and one for data sent ahead of up to `data_bytes`, and binds `records` and `data`
// to them. Both stay closed for 0 data bytes, a backend without eager messages, or a communicator its
// backend has no use for them on.
Status OpenEager(Comm* comm, size_t record_bytes, size_t data_bytes, EagerChannel* records, EagerChannel* data);

}  // namespace hvdcore
