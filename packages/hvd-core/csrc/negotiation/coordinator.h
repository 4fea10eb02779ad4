// The coordinator of one process set (its rank 0): collects requests from every member, decides
// which tensors are ready, checks that all members agree about them, and orders the responses.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "diagnostics/stall_inspector.h"
#include "negotiation/message.h"
#include "negotiation/response_cache.h"

namespace hvdcore {

// When every member had sent its request for `tensor`: `last` (process-set rank) was the last, `late_us` after
// the first (the coordinator's clock; 0 when all came in one cycle).
struct ArrivalSpread {
  std::string tensor;
  int32_t last = -1;
  int64_t late_us = 0;
};

class Coordinator {
 public:
  explicit Coordinator(int32_t set_size) : size_(set_size), joined_(set_size, false) {}

  // Takes one member's requests. Cache invalidations become erase orders in `out`.
  void Add(const std::vector<Request>& requests, int64_t now_us, const ResponseCache& cache, ResponseList* out);
  // Appends responses for everything now ready, in the order the tensors first arrived.
  void Collect(ResponseList* out);
  // The arrivals of the tensors Collect found ready since the last call (the job-end report's).
  std::vector<ArrivalSpread> TakeArrivals() { return std::move(arrivals_); }
  // Stalled tensors (submitted by some members, not all) older than `min_age_us`.
  std::vector<StalledTensor> Stalled(int64_t now_us, int64_t min_age_us) const;
  bool empty() const { return table_.empty(); }

 private:
  struct Pending {
    std::vector<Request> by_rank;
    std::vector<bool> has;
    int32_t count = 0;
    int64_t first_us = 0;
    std::vector<int64_t> arrived_us;  // by member: when its request came
    uint64_t seq = 0;
  };
  Response Build(const std::string& name, const Pending& p) const;
  void Emit(Response r, int64_t group_id, int32_t group_size, ResponseList* out);

  int32_t size_;
  uint64_t seq_ = 0;
  std::unordered_map<std::string, Pending> table_;
  std::vector<bool> joined_;
  int32_t joined_count_ = 0;
  int32_t last_joined_ = -1;
  // Grouped tensors wait here until the whole group is ready, then go out together.
  std::map<int64_t, std::vector<Response>> groups_;
  std::vector<ArrivalSpread> arrivals_;
};

}  // namespace hvdcore
