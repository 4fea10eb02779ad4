#include "negotiation/response_cache.h"

#include <algorithm>

#include "horovod/hvd_reduce.hpp"

namespace hvdcore {

static bool TrailingDimsEqual(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (size_t i = 1; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

bool EntryMatchesResponse(const TensorEntry& e, const Response& r, int32_t set_size) {
  if (r.type != e.type || r.names.size() != 1) return false;
  if (e.type == OpType::kBarrier) return true;
  if (r.dtype != e.input.dtype || r.device_kind != e.input.device_kind) return false;
  switch (e.type) {
    case OpType::kAllreduce:
    case OpType::kReducescatter:
      return r.op == e.op && r.prescale == e.prescale && r.postscale == e.postscale && r.shapes[0] == e.input.shape;
    case OpType::kBroadcast: return r.root == e.root && r.shapes[0] == e.input.shape;
    case OpType::kAllgather:
    case OpType::kAlltoall:
      // The first dimension (and the splits) may change from call to call: a member whose sizes
      // changed sends its new ones with its cache bit (response_cache.h, controller.cc).
      return TrailingDimsEqual(r.shapes[0], e.input.shape) &&
             r.tensor_sizes.size() == (size_t)SizesPerMember(e.type, set_size) * set_size;
    default: return false;
  }
}

int32_t SizesPerMember(OpType type, int32_t set_size) {
  return type == OpType::kAllgather ? 1 : type == OpType::kAlltoall ? set_size : 0;
}

std::vector<int64_t> MemberSizes(const TensorEntry& e, int32_t set_size) {
  if (e.input.shape.empty()) return std::vector<int64_t>(SizesPerMember(e.type, set_size), 0);
  if (e.type == OpType::kAllgather) return {e.input.shape[0]};
  if (e.type != OpType::kAlltoall) return {};
  if (!e.splits.empty()) return e.splits;
  return std::vector<int64_t>(set_size, e.input.shape[0] / set_size);  // validated: divisible
}

int64_t RowElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

size_t MemberInputBytes(const Response& r, const int64_t* sizes, int32_t set_size) {
  int64_t rows = 0;
  for (int32_t i = 0; i < SizesPerMember(r.type, set_size); ++i) rows += sizes[i];
  return (size_t)(rows * RowElements(r.shapes[0])) * hvd::dtype_size(r.dtype);
}

bool SizesMatch(const TensorEntry& e, const Response& r, int32_t set_size, int32_t member) {
  const size_t per = (size_t)SizesPerMember(e.type, set_size);
  if (per == 0) return true;
  if (member < 0 || r.tensor_sizes.size() != per * set_size) return false;
  std::vector<int64_t> mine = MemberSizes(e, set_size);
  return mine.size() == per && std::equal(mine.begin(), mine.end(), r.tensor_sizes.begin() + per * member);
}

ResponseCache::Lookup ResponseCache::Find(const TensorEntry& entry, int32_t set_size, int32_t* slot) const {
  auto it = by_name_.find(entry.name);
  if (it == by_name_.end()) return Lookup::kMiss;
  if (!EntryMatchesResponse(entry, slots_[it->second].response, set_size)) return Lookup::kMismatch;
  *slot = it->second;
  return Lookup::kHit;
}

int32_t ResponseCache::SlotOf(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

void ResponseCache::Put(const Response& response) {
  if (capacity_ <= 0 || response.names.size() != 1) return;
  const std::string& name = response.names[0];
  int32_t slot = SlotOf(name);
  if (slot < 0) {
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else if ((int32_t)slots_.size() < capacity_) {
      slot = (int32_t)slots_.size();
      slots_.emplace_back();
    } else {
      slot = 0;  // evict the least recently used; ties cannot happen, the clock is strictly increasing
      for (int32_t i = 1; i < (int32_t)slots_.size(); ++i)
        if (slots_[i].last_used < slots_[slot].last_used) slot = i;
      by_name_.erase(slots_[slot].response.names[0]);
    }
  }
  slots_[slot].used = true;
  ++slots_[slot].generation;
  slots_[slot].response = response;
  slots_[slot].last_used = ++clock_;
  by_name_[name] = slot;
}

void ResponseCache::SetMemberSizes(int32_t slot, int32_t member, int32_t set_size, const int64_t* sizes) {
  Response& r = slots_[slot].response;
  const size_t per = (size_t)SizesPerMember(r.type, set_size);
  if (per == 0 || member < 0 || member >= set_size || r.tensor_sizes.size() != per * set_size) return;
  std::copy(sizes, sizes + per, r.tensor_sizes.begin() + per * member);
}

void ResponseCache::Erase(int32_t slot) {
  if (slot < 0 || slot >= (int32_t)slots_.size() || !slots_[slot].used) return;
  by_name_.erase(slots_[slot].response.names[0]);
  const uint64_t generation = slots_[slot].generation;
  slots_[slot] = Slot();
  slots_[slot].generation = generation + 1;
  free_.push_back(slot);
}

}  // namespace hvdcore
