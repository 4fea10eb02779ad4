// The timeline: a Chrome trace (JSON array format, opened by Perfetto and chrome://tracing) of
// every tensor's negotiation and execution, written by the job's rank 0.
#pragma once

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/common.h"

namespace hvdcore {

class Timeline {
 public:
  ~Timeline() { Stop(); }
  Status Start(const std::string& path, bool mark_cycles);
  void Stop();
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // Each tensor is one row ("process" in trace terms) named after it.
  void Begin(const std::string& tensor, const std::string& activity, int64_t ts_us = 0);
  void End(const std::string& tensor, int64_t ts_us = 0);
  void MarkCycle();

 private:
  int RowOf(const std::string& tensor);
  void Event(const std::string& json);
  std::atomic<bool> active_{false};
  bool mark_cycles_ = false;
  std::mutex mu_;
  FILE* file_ = nullptr;
  bool first_event_ = true;
  int64_t start_us_ = 0;
  std::unordered_map<std::string, int> rows_;
};

}  // namespace hvdcore
