// The shared-memory transport between the members of a communicator that all run on one host.
//
// Gloo moves every byte through TCP, also between two processes of one machine: on loopback that is
// four copies and a handful of system calls per message, and 150 to 300 us for even the smallest
// collective. When every member is on this host (same boot, same PID and mount namespaces, same
// user), the members instead map one POSIX shared-memory region and exchange data through it:
// one copy in, one copy out, and a synchronisation that costs a few microseconds. The Gloo context
// stays connected beside it, for send/recv, which keep using TCP. HOROVOD_GLOO_SHARED_MEMORY=0 turns the transport off.
//
// The region holds, per member, a control block (a sequence counter, a count of sleepers, its
// process identity, whether it has left, the signature of its current collective) and a data
// slot. Members advance in lockstep, because every member runs the same collectives in the same
// order: a member publishes each step by
// raising its counter, and waits for a step of its peers by watching theirs (spinning briefly,
// then sleeping on a futex). A wait never lasts longer than the communicator's timeout, and it
// notices a peer whose process has exited, or that has closed its communicator, within
// milliseconds. (The timeout bounds each wait, as Gloo's does: a long collective that keeps making
// progress does not time out.)
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "horovod/hvd_backend.h"
#include "shm_signature.h"

struct hvd_comm;

namespace hvd_gloo {

class BufferList;
class StoreAdapter;

// A failure of the shared-memory transport; Guarded() turns it into a status and a message.
struct ShmFailure {
  int status;
  std::string message;
};

class ShmGroup {
 public:
  // Sets up the transport for `comm` if every member is on this host and can map the region, or
  // returns null (then everyone uses TCP). Every member reaches the same answer: the decision is
  // made from what all of them publish in the store. Throws what the store adapter throws.
  static std::unique_ptr<ShmGroup> Connect(hvd_comm* comm, StoreAdapter& store);
  ~ShmGroup();  // tells the peers this member has left, then unmaps

  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  int32_t rank() const { return rank_; }
  int32_t size() const { return size_; }
  // Bytes each member's slot holds: collectives larger than this go through it in pieces.
  size_t slot_bytes() const { return slot_bytes_; }
  uint8_t* slot(int32_t member) const { return slots_ + (size_t)member * slot_bytes_; }

  // Publishes this member's next step; returns its number.
  uint32_t Publish();
  // Waits until every other member (or `member`) has published `step`. Throws ShmFailure on
  // timeout, or when the peer has gone.
  void AwaitAll(uint32_t step);
  void Await(int32_t member, uint32_t step);
  // Before overwriting its slot, a member waits until every peer has finished reading it: the
  // step each collective publishes once it has read its peers' slots.
  void AwaitSlotFree();
  void MarkSlotRead(uint32_t step) { slot_read_step_ = step; }

  // A collective's first step, in place of AwaitAll(Publish()): publishes this member's signature
  // with it (shm_signature.h), waits for every peer's, and throws ShmFailure
  // (HVD_ERR_INVALID_ARGUMENT), naming both collectives, when a peer announced another. Call it
  // once the slot is free (AwaitSlotFree), which also means every peer has checked the previous
  // collective's signature, so none is overwritten before it was read.
  void OpenStep(const Signature& mine);

 private:
  struct Control;
  ShmGroup(hvd_comm* comm, void* base, size_t bytes, size_t slot_bytes);
  Control* control(int32_t member) const;
  void WaitForStep(int32_t member, uint32_t step);
  void CheckSignatures(const Signature& mine) const;
  [[noreturn]] void FailWaiting(int32_t member, int status, const std::string& why);
  std::string PeerGone(int32_t member) const;  // empty while the peer is alive and present

  hvd_comm* comm_;
  int32_t rank_, size_;
  void* base_;
  size_t bytes_;
  size_t slot_bytes_;
  uint8_t* slots_;
  uint32_t step_ = 0;            // the last step this member published
  uint32_t slot_read_step_ = 0;  // the step at which the peers will have read this member's slot
};

// The collectives on the shared-memory transport (shm_collectives.cc): same contracts as the ABI
// functions, called by them once arguments are checked. Throw ShmFailure.
// Each result is multiplied by `postscale` (hvd::scale) before it is written.
void ShmAllreduce(ShmGroup& g, const BufferList& buffers, hvd_dtype dtype, hvd_reduce_op op, double postscale);
void ShmAllgatherv(ShmGroup& g, const void* sendbuf, void* recvbuf, const size_t* recvcounts, size_t element_size);
void ShmBroadcast(ShmGroup& g, void* buf, size_t bytes, int32_t root);
void ShmAlltoallv(ShmGroup& g, const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
                  size_t element_size);
void ShmReducescatter(ShmGroup& g, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                      hvd_reduce_op op);
void ShmBarrier(ShmGroup& g);

}  // namespace hvd_gloo
