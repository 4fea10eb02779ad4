#include "diagnostics/stall_inspector.h"

#include <map>
#include <sstream>

#include "core/common.h"

namespace hvdcore {

bool StallInspector::Due(int64_t now_us) {
  if (!enabled()) return false;
  if (last_check_us_ == 0) last_check_us_ = now_us;
  if (now_us - last_check_us_ < check_us_) return false;
  last_check_us_ = now_us;
  return true;
}

std::string StallInspector::Report(const std::vector<StalledTensor>& stalled, int32_t process_set_id,
                                   const std::vector<int32_t>& job_ranks, const Logger& log) const {
  if (stalled.empty()) return "";
  auto to_job = [&](const std::vector<int32_t>& rs) {
    std::vector<int32_t> out;
    for (int32_t r : rs) out.push_back(job_ranks[r]);
    return out;
  };
  // Group by missing rank: the question a user asks is "which rank is stuck, and on what".
  std::map<int32_t, std::vector<std::string>> by_missing;
  int64_t oldest = 0;
  for (const StalledTensor& t : stalled) {
    for (int32_t r : t.missing) by_missing[job_ranks[r]].push_back(t.name);
    oldest = std::max(oldest, t.age_us);
  }
  std::ostringstream msg;
  msg << "Stall detected in process set " << process_set_id << ": one or more tensors were submitted by some ranks "
      << "but not by others for more than " << check_us_ / 1000000.0 << " s.";
  for (const auto& kv : by_missing) {
    msg << " Rank " << kv.first << " has not submitted:";
    size_t shown = 0;
    for (const std::string& name : kv.second) {
      if (shown++ == 10) {
        msg << " ... (" << kv.second.size() - 10 << " more)";
        break;
      }
      msg << " '" << name << "'";
    }
    msg << ".";
  }
  for (const StalledTensor& t : stalled) {
    msg << " Tensor '" << t.name << "' was submitted by ranks " << RanksString(to_job(t.submitted)) << " "
        << t.age_us / 1000000 << " s ago.";
    break;  // one example is enough; the per-rank list above names every tensor
  }
  msg << " This usually means ranks called collectives in different orders or with different names, or one "
         "rank stopped (for example in data loading or an exception).";
  HVD_LOG(log, kWarning) << msg.str();
  if (shutdown_us_ > 0 && oldest >= shutdown_us_) {
    return msg.str() + " Shutting down after the stall exceeded HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=" +
           std::to_string(shutdown_us_ / 1000000.0) + ".";
  }
  return "";
}

}  // namespace hvdcore
