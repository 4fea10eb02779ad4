// What the autotuner scores settings by (horovod/common/autotune): the bytes of the collectives
// this rank ran, and the training steps they came in. A step begins where a tensor name comes
// again (a training step submits the same gradients every time), as Horovod's tuner counts them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>

namespace hvdcore {

class ThroughputMeter {
 public:
  // Where the last step began: steps so far, the bytes before it, and when (steady clock, us).
  struct StepMark {
    uint64_t steps = 0;
    uint64_t bytes = 0;
    int64_t time_us = 0;
  };

  // Steps are counted once enabled (a set lookup per tensor); bytes always.
  void EnableSteps() { count_steps_ = true; }

  // A tensor of `bytes` completed (engine thread).
  void Record(const std::string& name, uint64_t bytes) {
    const uint64_t before = bytes_.fetch_add(bytes, std::memory_order_relaxed);
    if (!count_steps_) return;
    if (!seen_.insert(name).second) {
      seen_.clear();
      seen_.insert(name);
      std::lock_guard<std::mutex> lk(mark_mu_);
      mark_ = {
          mark_.steps + 1, before,
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
              .count()};
    }
  }

  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  StepMark LastStep() const {
    std::lock_guard<std::mutex> lk(mark_mu_);
    return mark_;
  }

 private:
  bool count_steps_ = false;
  std::unordered_set<std::string> seen_;  // names since the current step began
  std::atomic<uint64_t> bytes_{0};
  mutable std::mutex mark_mu_;
  StepMark mark_;
};

}  // namespace hvdcore
