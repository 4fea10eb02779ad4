// What the autotuner scores settings by (horovod/common/autotune): the bytes of the collectives
// this rank ran, and the training steps they came in. A step begins where a tensor name comes
// again (a training step submits the same gradients every time), as Horovod's tuner counts them.
// The timeline's step window (HOROVOD_TIMELINE_STEPS) follows the same steps.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
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

  // Steps are counted once enabled (a set lookup per tensor); bytes always. `on_step` (if given)
  // runs on the engine's thread as each step after the first begins, with the steps so far.
  void EnableSteps(std::function<void(uint64_t)> on_step = nullptr) {
    count_steps_ = true;
    if (on_step) on_step_ = std::move(on_step);
  }

  // A tensor is about to move (engine thread): where its name comes again, a step begins.
  void Arrive(const std::string& name) {
    if (!count_steps_ || seen_.insert(name).second) return;
    seen_.clear();
    seen_.insert(name);
    uint64_t steps;
    {
      std::lock_guard<std::mutex> lk(mark_mu_);
      mark_ = {
          mark_.steps + 1, bytes(),
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
              .count()};
      steps = mark_.steps;
    }
    if (on_step_) on_step_(steps);
  }
  // A tensor of `bytes` completed (engine thread).
  void Moved(uint64_t bytes) { bytes_.fetch_add(bytes, std::memory_order_relaxed); }

  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  StepMark LastStep() const {
    std::lock_guard<std::mutex> lk(mark_mu_);
    return mark_;
  }

 private:
  bool count_steps_ = false;
  std::function<void(uint64_t)> on_step_;
  std::unordered_set<std::string> seen_;  // names since the current step began
  std::atomic<uint64_t> bytes_{0};
  mutable std::mutex mark_mu_;
  StepMark mark_;
};

}  // namespace hvdcore
