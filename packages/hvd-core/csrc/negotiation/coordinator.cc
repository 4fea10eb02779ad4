#include "negotiation/coordinator.h"

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>

#include "horovod/hvd_reduce.hpp"

namespace hvdcore {
namespace {

bool Cacheable(OpType t) {
  return t == OpType::kAllreduce || t == OpType::kAllgather || t == OpType::kBroadcast || t == OpType::kAlltoall ||
         t == OpType::kReducescatter || t == OpType::kBarrier;
}

// "rank 0 has [2, 3]; ranks [1, 2] have [4]": every distinct value with the ranks holding it.
std::string Disagreement(const std::vector<std::pair<int32_t, std::string>>& values) {
  std::map<std::string, std::vector<int32_t>> by_value;
  std::vector<std::string> order;
  for (const auto& rv : values) {
    if (!by_value.count(rv.second)) order.push_back(rv.second);
    by_value[rv.second].push_back(rv.first);
  }
  std::ostringstream s;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& ranks = by_value[order[i]];
    s << (i ? "; " : "");
    if (ranks.size() == 1)
      s << "rank " << ranks[0] << " has " << order[i];
    else
      s << "ranks " << RanksString(ranks) << " have " << order[i];
  }
  return s.str();
}

std::string FormatDouble(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

void Coordinator::Add(const std::vector<Request>& requests, int64_t now_us, const ResponseCache& cache,
                      ResponseList* out) {
  for (const Request& r : requests) {
    if (r.rank < 0 || r.rank >= size_) continue;  // validated by the caller; never index out of range
    if (r.invalidates_cache) {
      int32_t slot = cache.SlotOf(r.name);
      if (slot >= 0 && std::find(out->cache_erase.begin(), out->cache_erase.end(), slot) == out->cache_erase.end())
        out->cache_erase.push_back(slot);
    }
    if (r.type == OpType::kJoin) {
      if (!joined_[r.rank]) {
        joined_[r.rank] = true;
        ++joined_count_;
      }
      last_joined_ = r.rank;
      continue;
    }
    Pending& p = table_[r.name];
    if (p.by_rank.empty()) {
      p.by_rank.resize(size_);
      p.has.assign(size_, false);
      p.arrived_us.assign(size_, 0);
      p.first_us = now_us;
      p.seq = seq_++;
    }
    if (!p.has[r.rank]) {
      p.has[r.rank] = true;
      p.arrived_us[r.rank] = now_us;
      ++p.count;
    }
    p.by_rank[r.rank] = r;
  }
}

void Coordinator::Collect(ResponseList* out) {
  // Ready: every member either submitted the tensor or has joined (and contributes neutral data).
  std::vector<std::pair<uint64_t, std::string>> ready;
  for (const auto& kv : table_) {
    const Pending& p = kv.second;
    int32_t covered = p.count;
    for (int32_t r = 0; r < size_; ++r)
      if (!p.has[r] && joined_[r]) ++covered;
    if (covered == size_) ready.emplace_back(p.seq, kv.first);
  }
  std::sort(ready.begin(), ready.end());
  for (const auto& sn : ready) {
    auto it = table_.find(sn.second);
    const Pending& p = it->second;
    int32_t first = 0;
    while (!p.has[first]) ++first;
    int64_t group_id = p.by_rank[first].group_id;
    int32_t group_size = p.by_rank[first].group_size;
    Response response = Build(sn.second, p);
    ArrivalSpread spread{sn.second, first, 0};
    for (int32_t r = 0; r < size_; ++r) {
      if (p.has[r] && p.arrived_us[r] - p.first_us > spread.late_us)
        spread = {sn.second, r, p.arrived_us[r] - p.first_us};
    }
    arrivals_.push_back(std::move(spread));
    table_.erase(it);
    Emit(std::move(response), group_id, group_size, out);
  }
  if (joined_count_ == size_) {
    Response join;
    join.type = OpType::kJoin;
    join.names = {"join"};
    join.shapes = {{}};
    join.last_joined_rank = last_joined_;
    out->responses.push_back(std::move(join));
    joined_.assign(size_, false);
    joined_count_ = 0;
    last_joined_ = -1;
  }
}

void Coordinator::Emit(Response r, int64_t group_id, int32_t group_size, ResponseList* out) {
  if (group_id < 0) {
    out->responses.push_back(std::move(r));
    return;
  }
  auto& members = groups_[group_id];
  members.push_back(std::move(r));
  if ((int32_t)members.size() >= group_size) {
    // Errors first (members refused at submission, Engine::Refuse): every rank completes them
    // before the rest, so that a caller woken by the rest finds the group's names free again.
    std::stable_partition(members.begin(), members.end(),
                          [](const Response& m) { return m.kind == Response::Kind::kError; });
    for (Response& m : members) out->responses.push_back(std::move(m));
    groups_.erase(group_id);
  }
}

Response Coordinator::Build(const std::string& name, const Pending& p) const {
  std::vector<const Request*> present;
  std::vector<int32_t> ranks;
  for (int32_t r = 0; r < size_; ++r)
    if (p.has[r]) {
      present.push_back(&p.by_rank[r]);
      ranks.push_back(r);
    }
  const Request& ref = *present[0];
  Response error;
  error.kind = Response::Kind::kError;
  error.type = ref.type;
  error.names = {name};
  error.shapes = {ref.shape};

  // A member that refused the operation when it was submitted: everyone gets its reason.
  for (size_t i = 0; i < present.size(); ++i) {
    if (!present[i]->refusal.empty()) {
      error.error = "refused on rank " + std::to_string(ranks[i]) + ": " + present[i]->refusal;
      return error;
    }
  }

  // Checks one property across members; on disagreement fills `error` and returns false.
  auto agree = [&](const char* what, const std::function<std::string(const Request&)>& show) {
    std::vector<std::pair<int32_t, std::string>> values;
    bool same = true;
    std::string first_value = show(ref);
    for (size_t i = 0; i < present.size(); ++i) {
      values.emplace_back(ranks[i], show(*present[i]));
      same = same && values.back().second == first_value;
    }
    if (!same) {
      error.error = std::string("Mismatched ") + what + " for " + OpTypeName(ref.type) + " tensor '" + name +
                    "': " + Disagreement(values) + ".";
    }
    return same;
  };
  auto trailing = [](const Request& r) {
    if (r.shape.empty()) return std::string("a scalar");
    std::vector<int64_t> t(r.shape.begin() + 1, r.shape.end());
    return std::string("[d0") + (t.empty() ? "" : ", ") + ShapeString(t).substr(1);
  };

  bool ok = agree("collective operations", [](const Request& r) { return std::string(OpTypeName(r.type)); });
  ok = ok && agree("data types", [](const Request& r) { return std::string(hvd::dtype_name(r.dtype)); });
  ok = ok &&
       agree("devices", [](const Request& r) { return std::string(r.device_kind == HVD_DEVICE_CPU ? "cpu" : "cuda"); });
  ok = ok && agree("groups", [](const Request& r) {
         return r.group_id < 0 ? std::string("no group")
                               : "group " + std::to_string(r.group_id) + " of " + std::to_string(r.group_size);
       });
  switch (ref.type) {
    case OpType::kAllreduce:
    case OpType::kReducescatter:
      ok = ok && agree("reduce ops", [](const Request& r) { return std::string(ReduceOpName(r.op)); });
      ok = ok && agree("prescale factors", [](const Request& r) { return FormatDouble(r.prescale); });
      ok = ok && agree("postscale factors", [](const Request& r) { return FormatDouble(r.postscale); });
      ok = ok && agree("shapes", [](const Request& r) { return ShapeString(r.shape); });
      break;
    case OpType::kBroadcast:
      ok = ok && agree("root ranks", [](const Request& r) { return std::to_string(r.root); });
      ok = ok && agree("shapes", [](const Request& r) { return ShapeString(r.shape); });
      if (ok && joined_[ref.root]) {
        error.error = "broadcast of tensor '" + name + "' from root rank " + std::to_string(ref.root) +
                      ", which has already joined";
        ok = false;
      }
      break;
    case OpType::kAllgather: ok = ok && agree("shapes (all dimensions but the first must match)", trailing); break;
    case OpType::kAlltoall:
      ok = ok && agree("shapes (all dimensions but the first must match)", trailing);
      // Checked when submitted (validation.cc); here only what a request off the wire could break.
      for (size_t i = 0; ok && i < present.size(); ++i) {
        const Request& q = *present[i];
        bool fit = (int32_t)q.splits.size() == size_ && !q.shape.empty();
        int64_t left = fit ? q.shape[0] : 0;  // the splits are not negative (message.cc)
        for (size_t k = 0; fit && k < q.splits.size(); ++k) {
          fit = q.splits[k] <= left;
          left -= fit ? q.splits[k] : 0;
        }
        if (!fit || left != 0) {
          error.error = "alltoall of tensor '" + name + "': rank " + std::to_string(ranks[i]) + " sent " +
                        std::to_string(q.splits.size()) + " splits for the shape " + ShapeString(q.shape) +
                        "; expected one per rank (" + std::to_string(size_) + ") summing to the first dimension";
          ok = false;
        }
      }
      break;
    case OpType::kAddProcessSet:
    case OpType::kRemoveProcessSet:
      if (ref.type == OpType::kAddProcessSet) {
        ok = ok && agree("process set members", [](const Request& r) { return RanksString(r.ranks); });
      } else {
        ok = ok && agree("process set ids", [](const Request& r) { return RanksString(r.ranks); });
      }
      // Every rank must apply the change at the same point; a joined rank cannot take part.
      if (ok && (int32_t)present.size() < size_) {
        std::vector<int32_t> joined_ranks;
        for (int32_t r = 0; r < size_; ++r)
          if (!p.has[r]) joined_ranks.push_back(r);
        error.error = std::string(OpTypeName(ref.type)) + " cannot run while ranks " + RanksString(joined_ranks) +
                      " have joined; change process sets before calling join()";
        ok = false;
      }
      break;
    default: break;
  }
  if (!ok) return error;

  Response r;
  r.type = ref.type;
  r.dtype = ref.dtype;
  r.op = ref.op;
  r.root = ref.root;
  r.device_kind = ref.device_kind;
  r.prescale = ref.prescale;
  r.postscale = ref.postscale;
  r.names = {name};
  r.shapes = {ref.shape};
  r.ranks = ref.ranks;
  r.cacheable = Cacheable(ref.type) && ref.group_id < 0;
  // Every member's sizes, so that none has to ask the others before the data moves (message.h);
  // a joined member without the tensor contributes none.
  if (ref.type == OpType::kAllgather) {
    r.tensor_sizes.assign(size_, 0);
    for (int32_t m = 0; m < size_; ++m)
      if (p.has[m] && !p.by_rank[m].shape.empty()) r.tensor_sizes[m] = p.by_rank[m].shape[0];
  } else if (ref.type == OpType::kAlltoall) {
    r.tensor_sizes.assign((size_t)size_ * size_, 0);
    for (int32_t m = 0; m < size_; ++m)
      if (p.has[m])
        std::copy(p.by_rank[m].splits.begin(), p.by_rank[m].splits.end(), r.tensor_sizes.begin() + (size_t)size_ * m);
  }
  return r;
}

std::vector<StalledTensor> Coordinator::Stalled(int64_t now_us, int64_t min_age_us) const {
  std::vector<std::pair<uint64_t, StalledTensor>> found;
  for (const auto& kv : table_) {
    const Pending& p = kv.second;
    if (now_us - p.first_us < min_age_us) continue;
    StalledTensor t;
    t.name = kv.first;
    t.age_us = now_us - p.first_us;
    for (int32_t r = 0; r < size_; ++r) {
      if (p.has[r])
        t.submitted.push_back(r);
      else if (!joined_[r])
        t.missing.push_back(r);
    }
    found.emplace_back(p.seq, std::move(t));
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<StalledTensor> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

}  // namespace hvdcore
