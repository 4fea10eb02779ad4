// The response cache: negotiation results remembered by name, identical on every rank.
//
// Every rank applies the same puts, touches and erases in the same order (they all follow the same
// response lists), so slot numbers agree everywhere and a tensor seen before is negotiated by one
// small bit-vector allreduce instead of a round trip through the coordinator.
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
  // Whether `entry` can use a cached response; on a hit *slot receives its number.
  Lookup Find(const TensorEntry& entry, int32_t set_size, int32_t* slot) const;
  // Slot number of `name`, or -1.
  int32_t SlotOf(const std::string& name) const;

  // Remembers a single-tensor response after it was executed (least recently used is evicted).
  void Put(const Response& response);
  void Touch(int32_t slot) { slots_[slot].last_used = ++clock_; }
  void Erase(int32_t slot);
  const Response& Get(int32_t slot) const { return slots_[slot].response; }

  // Number of slots ever used: the length of the bit-vector, equal on every rank.
  int32_t num_slots() const { return (int32_t)slots_.size(); }
  bool enabled() const { return capacity_ > 0; }

 private:
  struct Slot {
    bool used = false;
    Response response;
    uint64_t last_used = 0;
  };
  int32_t capacity_;
  uint64_t clock_ = 0;
  std::vector<Slot> slots_;
  std::vector<int32_t> free_;
  std::unordered_map<std::string, int32_t> by_name_;
};

// The response an entry would get if negotiated alone (what the cache compares against).
bool EntryMatchesResponse(const TensorEntry& entry, const Response& response, int32_t set_size);

}  // namespace hvdcore
