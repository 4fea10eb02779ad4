// The timeline: a Chrome trace (JSON array format, opened by Perfetto and chrome://tracing) of
// every tensor's negotiation and execution and the callers' waits, written by the job's rank 0
// (or by every rank, HOROVOD_TIMELINE_ALL_RANKS).
//
// The file is a complete JSON array at every moment: events are kept in memory and written in
// chunks, each one write of the new events followed by the array's end, over the previous end. A
// rank killed outright loses the events of its last chunk (at most kFlushUs), never the file's
// validity. A size cap stops the timeline with a note as its last event.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/common.h"

namespace hvdcore {

class Timeline {
 public:
  ~Timeline() { Stop(); }
  // `max_bytes` > 0: the file stops growing at about that size (the note says so). The file's first
  // event, "hvd_clock", gives `rank` and where its times start: on this host's monotonic clock
  // (the events' ts count from there) and in Unix time, which a merge of the ranks' files aligns by.
  Status Start(const std::string& path, bool mark_cycles, int64_t max_bytes = 0, int32_t rank = 0);
  void Stop();
  // A hint for callers that skip building an event's text when no timeline runs; every method
  // checks again under the lock, as Start and Stop may run on another thread at any moment.
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // Each tensor is one row ("process" in trace terms) named after it. An End whose Begin went to an
  // earlier file (the timeline restarted while the tensor was in flight) is dropped, and Stop ends
  // what is still open, so every file is a balanced trace.
  void Begin(const std::string& tensor, const std::string& activity, int64_t ts_us = 0);
  void End(const std::string& tensor, int64_t ts_us = 0);
  // The framework's caller blocked on the tensor's result from `began_us` to `ended_us`: an instant
  // SYNCHRONIZE on the tensor's row at `began_us` (instants need no nesting with its phases, which
  // the wait overlaps), the wait in its args.
  void Waited(const std::string& tensor, int64_t began_us, int64_t ended_us);
  // Once per engine iteration: a cycle marker (when asked for), and the events kept in memory
  // written out when kFlushUs has passed since the last write.
  void MarkCycle();

  static constexpr int64_t kFlushUs = 100000;
  static constexpr size_t kFlushBytes = 1 << 16;

 private:
  // A tensor's row, and how many of its activities have begun and not ended in this file.
  struct Row {
    int pid;
    int open;
  };
  // These are called with mu_ held.
  void CloseFile();
  void Flush();
  Row& RowOf(const std::string& tensor);
  void Event(const std::string& json);
  void EndEvent(int pid, int64_t ts_us);
  std::atomic<bool> active_{false};
  std::mutex mu_;  // guards every member below
  bool mark_cycles_ = false;
  int fd_ = -1;
  std::string path_;
  std::string pending_;  // events not yet written
  int64_t body_end_ = 0;  // where the written events end (the array's end follows)
  int64_t max_bytes_ = 0;
  int64_t last_flush_us_ = 0;
  bool first_event_ = true;
  int64_t start_us_ = 0;
  std::unordered_map<std::string, Row> rows_;
};

}  // namespace hvdcore
