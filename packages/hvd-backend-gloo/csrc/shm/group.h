// The shared-memory transport between the members of a communicator that all run on one host.
//
// Over TCP every byte moves through the network stack, also between two processes of one machine:
// on loopback that is four copies and a handful of system calls per message, and 150 to 300 us for
// even the smallest collective. When every member is on this host (same boot, same PID and mount
// namespaces, same user), the members instead map one POSIX shared-memory region and exchange data
// through it: one copy in, one copy out, and a synchronisation that costs a few microseconds. The
// host backend decides whether to try (host_backend.h); a member that may not use it makes every
// member decline.
//
// The region holds, per member, a control block (a sequence counter, a count of sleepers, its
// process identity, whether it has left, the signature of its current collective) and a data
// slot. Members advance in lockstep, because every member runs the same collectives in the same
// order: a member publishes each step by raising its counter, and waits for a step of its peers by
// watching theirs (spinning briefly, then sleeping on a futex). A wait never lasts longer than the
// communicator's timeout, and it notices a peer whose process has exited, or that has closed its
// communicator, within milliseconds. (The timeout bounds each wait, not the whole collective: a
// long collective that keeps making progress does not time out.)
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "horovod/hvd_backend.h"
#include "shm/host_backend.h"
#include "shm/signature.h"

namespace hvd_shm {

class Group {
 public:
  // Sets up the transport for the communicator `config` describes if every member is on this host,
  // may use shared memory and can map the region, or returns null (then none uses it). Every
  // member reaches the same answer: the decision is made from what all of them publish in the
  // store. Throws what the store throws.
  static std::unique_ptr<Group> Connect(const Config& config, Store& store);
  ~Group();  // tells the peers this member has left, then unmaps

  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int32_t rank() const { return config_.rank; }
  int32_t size() const { return config_.size; }
  // Bytes each member's slot holds: collectives larger than this go through it in pieces.
  size_t slot_bytes() const { return slot_bytes_; }
  uint8_t* slot(int32_t member) const { return slots_ + (size_t)member * slot_bytes_; }

  // Publishes this member's next step; returns its number.
  uint32_t Publish();
  // Waits until every other member (or `member`) has published `step`. Throws Failure on timeout,
  // or when the peer has gone.
  void AwaitAll(uint32_t step);
  void Await(int32_t member, uint32_t step);
  // Before overwriting its slot, a member waits until every peer has finished reading it: the
  // step each collective publishes once it has read its peers' slots.
  void AwaitSlotFree();
  void MarkSlotRead(uint32_t step) { slot_read_step_ = step; }

  // A collective's first step, in place of AwaitAll(Publish()): publishes this member's signature
  // with it (signature.h), waits for every peer's, and throws Failure (HVD_ERR_INVALID_ARGUMENT),
  // naming both collectives, when a peer announced another. Call it once the slot is free
  // (AwaitSlotFree), which also means every peer has checked the previous collective's signature,
  // so none is overwritten before it was read.
  void OpenStep(const Signature& mine);

 private:
  struct Control;
  Group(const Config& config, void* base, size_t bytes, size_t slot_bytes);
  Control* control(int32_t member) const;
  void WaitForStep(int32_t member, uint32_t step);
  void CheckSignatures(const Signature& mine) const;
  [[noreturn]] void FailWaiting(int32_t member, int status, const std::string& why) const;
  std::string PeerGone(int32_t member) const;  // empty while the peer is alive and present
  std::string MemberName(int32_t member) const;  // "rank 3": its job rank

  Config config_;
  void* base_;
  size_t bytes_;
  size_t slot_bytes_;
  uint8_t* slots_;
  uint32_t step_ = 0;            // the last step this member published
  uint32_t slot_read_step_ = 0;  // the step at which the peers will have read this member's slot
};

}  // namespace hvd_shm
