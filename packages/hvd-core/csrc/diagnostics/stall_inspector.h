// The stall inspector: reports tensors that some ranks submitted and others did not, and after
// HOROVOD_STALL_SHUTDOWN_TIME_SECONDS turns the stall into an error on every rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "diagnostics/logging.h"

namespace hvdcore {

struct StalledTensor {
  std::string name;
  int64_t age_us = 0;
  std::vector<int32_t> submitted;  // process-set ranks
  std::vector<int32_t> missing;
};

class StallInspector {
 public:
  StallInspector(bool enabled, double check_s, double shutdown_s)
      : enabled_(enabled), check_us_((int64_t)(check_s * 1e6)), shutdown_us_((int64_t)(shutdown_s * 1e6)) {}
  bool enabled() const { return enabled_ && check_us_ > 0; }
  int64_t check_us() const { return check_us_; }
  // True when a check is due (at most once per check interval).
  bool Due(int64_t now_us);
  // Logs a warning for `stalled`; returns a non-empty shutdown error once a stall exceeds the
  // shutdown time. `job_ranks` maps process-set ranks to job ranks for the messages.
  std::string Report(const std::vector<StalledTensor>& stalled, int32_t process_set_id,
                     const std::vector<int32_t>& job_ranks, const Logger& log) const;

 private:
  bool enabled_;
  int64_t check_us_;
  int64_t shutdown_us_;
  int64_t last_check_us_ = 0;
};

}  // namespace hvdcore
