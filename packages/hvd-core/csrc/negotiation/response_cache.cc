#include "negotiation/response_cache.h"

namespace hvdcore {

static bool TrailingDimsEqual(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (size_t i = 1; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

bool EntryMatchesResponse(const TensorEntry& e, const Response& r, int32_t set_size) {
  (void)set_size;
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
      // The first dimension may change from call to call; it is exchanged when the op runs.
      return TrailingDimsEqual(r.shapes[0], e.input.shape);
    default: return false;
  }
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
  slots_[slot].response = response;
  slots_[slot].last_used = ++clock_;
  by_name_[name] = slot;
}

void ResponseCache::Erase(int32_t slot) {
  if (slot < 0 || slot >= (int32_t)slots_.size() || !slots_[slot].used) return;
  by_name_.erase(slots_[slot].response.names[0]);
  slots_[slot] = Slot();
  free_.push_back(slot);
}

}  // namespace hvdcore
