#include "diagnostics/job_stats.h"

#include <algorithm>

namespace hvdcore {

void JobStats::RecordOp(int32_t set_id, OpType type, uint64_t tensors, uint64_t bytes, int64_t time_us) {
  std::lock_guard<std::mutex> lk(mu_);
  OpTotals& op = totals_.sets[set_id].ops[(int)type];
  op.count += tensors;
  op.bytes += bytes;
  op.time_us += time_us;
}

void JobStats::RecordTensor(int32_t set_id, const std::string& name, uint64_t bytes, int64_t wait_us,
                            int64_t total_us) {
  std::lock_guard<std::mutex> lk(mu_);
  SetTotals& set = totals_.sets[set_id];
  set.wait_us += wait_us;
  auto it = set.tensors.find(name);
  if (it == set.tensors.end()) {
    it = set.tensors.emplace(set.tensors.size() < kMostTensors ? name : kOtherTensors, TensorTotals{}).first;
  }
  TensorTotals& t = it->second;
  ++t.count;
  t.bytes += bytes;
  t.total_us += total_us;
  t.most_us = std::max(t.most_us, total_us);
  t.wait_us += wait_us;
}

void JobStats::RecordFusedBuffer(uint64_t bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  ++totals_.fused_buffers;
  totals_.fused_bytes += bytes;
  totals_.most_fused_bytes = std::max(totals_.most_fused_bytes, bytes);
}

void JobStats::RecordArrival(int32_t set_id, const std::string& tensor, int32_t last, int64_t late_us) {
  std::lock_guard<std::mutex> lk(mu_);
  SetTotals& set = totals_.sets[set_id];
  ++set.arrivals;
  if (late_us <= 0) return;
  Lateness& l = set.lateness[last];
  ++l.last;
  l.late_us += late_us;
  if (late_us > l.most_us) {
    l.most_us = late_us;
    l.most_tensor = tensor;
  }
}

void JobStats::RecordStall(int32_t set_id, const std::vector<std::string>& tensors) {
  std::lock_guard<std::mutex> lk(mu_);
  SetTotals& set = totals_.sets[set_id];
  ++set.stalls;
  for (const std::string& name : tensors) {
    if (set.stalled_tensors.size() < kMostTensors || set.stalled_tensors.count(name)) ++set.stalled_tensors[name];
  }
}

JobStats::Snapshot JobStats::Take() const {
  std::lock_guard<std::mutex> lk(mu_);
  return totals_;
}

void Arrivals::Observe(const std::string& tensor, const std::vector<bool>& has, bool everyone, int64_t now_us,
                       int32_t set_id, const std::vector<int32_t>& job_ranks, JobStats* stats) {
  auto it = seen_.find(tensor);
  if (it == seen_.end()) {
    if (everyone) {  // every member in this one cycle: nobody was late
      if (stats) stats->RecordArrival(set_id, tensor, -1, 0);
      return;
    }
    it = seen_.emplace(tensor, std::vector<int64_t>(has.size(), 0)).first;
  }
  std::vector<int64_t>& first = it->second;
  for (size_t m = 0; m < has.size() && m < first.size(); ++m)
    if (has[m] && first[m] == 0) first[m] = now_us;
  if (!everyone) return;
  int64_t earliest = 0, latest = 0;
  int32_t last = -1;
  for (size_t m = 0; m < first.size(); ++m) {
    if (first[m] == 0) continue;  // a member that joined: it never arrives
    if (earliest == 0 || first[m] < earliest) earliest = first[m];
    if (first[m] > latest) {
      latest = first[m];
      last = (int32_t)m;
    }
  }
  if (last >= 0 && stats) {
    const int32_t job_rank = (size_t)last < job_ranks.size() ? job_ranks[last] : last;
    stats->RecordArrival(set_id, tensor, job_rank, latest - earliest);
  }
  seen_.erase(it);
}

}  // namespace hvdcore
