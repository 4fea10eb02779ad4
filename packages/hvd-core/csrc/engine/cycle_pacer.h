// How long the engine's loop waits between cycles while work is pending on some rank and a caller
// of this process is blocked waiting for a result.
//
// A rank whose tensors wait for a peer's cannot know when the peer submits them: it finds out in
// the next cycle. Waiting the whole HOROVOD_CYCLE_TIME (1 ms) between cycles delays every such
// tensor by up to that long; cycling sooner costs a negotiation each time. So the wait follows
// what a negotiation costs on this transport: a multiple of the fastest one seen recently (the
// fastest, because a slow one was mostly waiting for a peer, not working), never above the cycle
// time. Over TCP a negotiation takes a few hundred microseconds and the wait stays at the cycle
// time; through shared memory it takes microseconds and cycles follow each other within tens.
// Only while a caller is blocked, though: a training step's backward pass, which submits gradients
// without waiting for them, needs its core for computing, not for quicker cycles.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace hvdcore {

class CyclePacer {
 public:
  using Micros = std::chrono::microseconds;
  explicit CyclePacer(Micros cycle) : cycle_(cycle) {}
  void SetCycle(Micros cycle) { cycle_ = cycle; }  // the autotuner's

  // The duration of one negotiation of the global process set.
  void Record(Micros negotiation) {
    window_fastest_ = std::min(window_fastest_, negotiation);
    if (++window_count_ == kWindow) {  // forget old figures: the machine's load changes
      fastest_ = window_fastest_;
      window_fastest_ = Micros::max();
      window_count_ = 0;
    }
  }

  // The wait before the next cycle while some rank has work pending.
  Micros BusyWait() const {
    Micros fastest = std::min(fastest_, window_fastest_);
    if (fastest == Micros::max()) return cycle_;
    return std::clamp(fastest * kNegotiationShare, std::min(kShortest, cycle_), cycle_);
  }

 private:
  static constexpr int kWindow = 128;
  // Waiting this many times a negotiation's cost keeps a waiting engine's negotiations to about a
  // ninth of its time.
  static constexpr int kNegotiationShare = 8;
  static constexpr Micros kShortest{50};
  Micros cycle_;
  Micros fastest_ = Micros::max();
  Micros window_fastest_ = Micros::max();
  int window_count_ = 0;
};

}  // namespace hvdcore
