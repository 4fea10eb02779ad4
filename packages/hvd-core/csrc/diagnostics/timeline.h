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
  // A hint for callers that skip building an event's text when no timeline runs; every method
  // checks again under the lock, as Start and Stop may run on another thread at any moment.
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // Each tensor is one row ("process" in trace terms) named after it. An End whose Begin went to an
  // earlier file (the timeline restarted while the tensor was in flight) is dropped, and Stop ends
  // what is still open, so every file is a balanced trace.
  void Begin(const std::string& tensor, const std::string& activity, int64_t ts_us = 0);
  void End(const std::string& tensor, int64_t ts_us = 0);
  void MarkCycle();

 private:
  // A tensor's row, and how many of its activities have begun and not ended in this file.
  struct Row {
    int pid;
    int open;
  };
  // These are called with mu_ held.
  void CloseFile();
  Row& RowOf(const std::string& tensor);
  void Event(const std::string& json);
  void EndEvent(int pid, int64_t ts_us);
  std::atomic<bool> active_{false};
  std::mutex mu_;  // guards every member below
  bool mark_cycles_ = false;
  FILE* file_ = nullptr;
  bool first_event_ = true;
  int64_t start_us_ = 0;
  std::unordered_map<std::string, Row> rows_;
};

}  // namespace hvdcore
