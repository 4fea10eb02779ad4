// The response cache: negotiation results remembered by name, identical on every rank.
//
// Every rank applies the same puts, touches and erases in the same order (they all follow the same
// response lists), so slot numbers agree everywhere and a tensor seen before is negotiated by one
// small bit-vector allreduce instead of a round trip through the coordinator.
//
// Allgather and alltoall responses also hold every member's sizes (Response::tensor_sizes: first
// dimensions, or the table of splits), which the executor moves the data by without asking the
// members again. A cached response is only ever used with every member's sizes as they are now:
//  - A cached tensor is ready only when *every* member that has not joined set its bit in the same
//    cycle (controller.cc), and a member sets it only when the cached response matches its entry
//    (Find: op, dtype, device, all dimensions but the first). Its own sizes need not match: when
//    they changed, the member sends its new ones with its bit, in the cycle's gathered records,
//    and every member writes them into its copy of the response before using it (and so the
//    caches stay alike: every member applies the same records). When they do not fit in the
//    record's inline area, the member treats the entry as changed: its bit stays clear, its request
//    drops the entry on every rank and the coordinator answers with fresh sizes.
//  - So when rank 1's first dimension changes and rank 0's does not, rank 0 hits and rank 1 either
//    hits sending its new size (which rank 0 then uses) or misses, which leaves the slot not ready
//    for anyone (rank 0's entry waits) until the coordinator has negotiated it again.
//  - A member that joined without the tensor sets no bit and contributes nothing: its sizes are
//    zeroed in that cycle's copy of the response (they stay in the cache for when it comes back).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/handle.h"
#include "negotiation/message.h"

namespace hvdcore {

class ResponseCache {
 public:
  explicit ResponseCache(int32_t capacity) : capacity_(capacity) {}

  enum class Lookup { kMiss, kHit, kMismatch };
  // Whether `entry` can use a cached response; on a hit *slot receives its number. A hit may still
  // hold other sizes for this member than the entry has (SizesMatch): they travel with the hit.
  Lookup Find(const TensorEntry& entry, int32_t set_size, int32_t* slot) const;
  // Slot number of `name`, or -1.
  int32_t SlotOf(const std::string& name) const;

  // Remembers a single-tensor response after it was executed (least recently used is evicted).
  void Put(const Response& response);
  void Touch(int32_t slot) { slots_[slot].last_used = ++clock_; }
  void Erase(int32_t slot);
  // Counts the puts and erases of `slot`: a slot whose generation changed holds another response
  // (or none), even under the same name.
  uint64_t Generation(int32_t slot) const { return slots_[slot].generation; }
  const Response& Get(int32_t slot) const { return slots_[slot].response; }
  // Replaces `member`'s row of the slot's tensor_sizes (SizesPerMember values at `sizes`).
  void SetMemberSizes(int32_t slot, int32_t member, int32_t set_size, const int64_t* sizes);

  // Number of slots ever used: the length of the bit-vector, equal on every rank.
  int32_t num_slots() const { return (int32_t)slots_.size(); }
  bool enabled() const { return capacity_ > 0; }
  int32_t capacity() const { return capacity_; }

 private:
  struct Slot {
    bool used = false;
    Response response;
    uint64_t last_used = 0;
    uint64_t generation = 0;
  };
  int32_t capacity_;
  uint64_t clock_ = 0;
  std::vector<Slot> slots_;
  std::vector<int32_t> free_;
  std::unordered_map<std::string, int32_t> by_name_;
};

// The response an entry would get if negotiated alone (what the cache compares against), but for
// this member's sizes (SizesMatch).
bool EntryMatchesResponse(const TensorEntry& entry, const Response& response, int32_t set_size);

// How many values each member has in Response::tensor_sizes: 1 for allgather (its first
// dimension), set_size for alltoall (its splits), 0 for the other ops.
int32_t SizesPerMember(OpType type, int32_t set_size);
// What `entry`'s member contributes to tensor_sizes: its first dimension (allgather), or its
// splits, even ones written out when none were given (alltoall). Empty for the other ops.
std::vector<int64_t> MemberSizes(const TensorEntry& entry, int32_t set_size);
// Elements in one row of `shape` (all dimensions but the first): what each unit of a size counts.
int64_t RowElements(const std::vector<int64_t>& shape);
// Bytes of a member's input to an allgather or alltoall `response` whose sizes are `sizes` (its
// SizesPerMember values): the rows they add up to.
size_t MemberInputBytes(const Response& response, const int64_t* sizes, int32_t set_size);
// Whether `response` holds `member`'s sizes as `entry` has them now.
bool SizesMatch(const TensorEntry& entry, const Response& response, int32_t set_size, int32_t member);

}  // namespace hvdcore
