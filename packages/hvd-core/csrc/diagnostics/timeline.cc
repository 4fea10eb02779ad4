#include "diagnostics/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

namespace hvdcore {
namespace {

// What follows the written events at every moment: the array's end.
constexpr char kArrayEnd[] = "\n]\n";

// All of `data` at `offset`, or false.
bool WriteAt(int fd, const std::string& data, int64_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = pwrite(fd, data.data() + done, data.size() - done, (off_t)(offset + (int64_t)done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += (size_t)n;
  }
  return true;
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if ((unsigned char)c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

Status Timeline::Start(const std::string& path, bool mark_cycles, int64_t max_bytes, int32_t rank) {
  std::lock_guard<std::mutex> lk(mu_);
  CloseFile();
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::InvalidArgument("cannot open timeline file '" + path + "': " + strerror(errno));
  path_ = path;
  body_end_ = 2;  // after "[\n"
  if (!WriteAt(fd_, std::string("[") + kArrayEnd, 0)) {
    const std::string why = strerror(errno);
    close(fd_);
    fd_ = -1;
    return Status::InvalidArgument("cannot write timeline file '" + path + "': " + why);
  }
  pending_.clear();
  max_bytes_ = max_bytes;
  last_flush_us_ = NowMicros();
  first_event_ = true;
  rows_.clear();
  mark_cycles_ = mark_cycles;
  start_us_ = NowMicros();
  const int64_t unix_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::ostringstream clock;
  clock << "{\"name\": \"hvd_clock\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"rank\": " << rank
        << ", \"start_monotonic_us\": " << start_us_ << ", \"start_unix_us\": " << unix_us << "}}";
  Event(clock.str());
  active_.store(true);
  return Status::Ok();
}

void Timeline::Stop() {
  std::lock_guard<std::mutex> lk(mu_);
  active_.store(false);
  CloseFile();
}

void Timeline::CloseFile() {
  if (fd_ < 0) return;
  int64_t now = NowMicros();
  for (auto& [tensor, row] : rows_) {
    for (; row.open > 0; --row.open) EndEvent(row.pid, now);
  }
  Flush();
  close(fd_);
  fd_ = -1;
}

void Timeline::Flush() {
  if (fd_ < 0 || pending_.empty()) return;
  // One write of the new events and the array's end, over the previous end: the file parses
  // before and after it.
  if (WriteAt(fd_, pending_ + kArrayEnd, body_end_)) body_end_ += (int64_t)pending_.size();
  pending_.clear();
  last_flush_us_ = NowMicros();
}

void Timeline::Event(const std::string& json) {
  if (fd_ < 0) return;
  if (max_bytes_ > 0 && body_end_ + (int64_t)(pending_.size() + json.size()) > max_bytes_) {
    // The cap: a last event says so, and the timeline stops (open activities stay open).
    std::ostringstream note;
    note << ",\n{\"name\": \"timeline stopped: it reached its size cap of " << max_bytes_
         << " bytes (HOROVOD_TIMELINE_MAX_BYTES)\", \"ph\": \"i\", \"s\": \"g\", \"ts\": " << NowMicros() - start_us_
         << ", \"pid\": 0, \"tid\": 0}";
    pending_ += first_event_ ? note.str().substr(2) : note.str();
    Flush();
    close(fd_);
    fd_ = -1;
    active_.store(false);
    return;
  }
  if (!first_event_) pending_ += ",\n";
  first_event_ = false;
  pending_ += json;
  if (pending_.size() >= kFlushBytes) Flush();
}

Timeline::Row& Timeline::RowOf(const std::string& tensor) {
  auto it = rows_.find(tensor);
  if (it != rows_.end()) return it->second;
  int pid = (int)rows_.size() + 1;  // row 0 holds the cycle markers
  Row& row = rows_[tensor] = Row{pid, 0};
  std::ostringstream s;
  s << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << pid << ", \"args\": {\"name\": \""
    << JsonEscape(tensor) << "\"}}";
  Event(s.str());
  s.str("");
  s << "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": " << pid << ", \"args\": {\"sort_index\": " << pid
    << "}}";
  Event(s.str());
  return row;
}

void Timeline::Begin(const std::string& tensor, const std::string& activity, int64_t ts_us) {
  if (!active()) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (fd_ < 0) return;
  Row& row = RowOf(tensor);
  int64_t ts = (ts_us ? ts_us : NowMicros()) - start_us_;
  std::ostringstream s;
  s << "{\"name\": \"" << JsonEscape(activity) << "\", \"ph\": \"B\", \"ts\": " << (ts < 0 ? 0 : ts)
    << ", \"pid\": " << row.pid << ", \"tid\": 0}";
  Event(s.str());
  ++row.open;
}

void Timeline::End(const std::string& tensor, int64_t ts_us) {
  if (!active()) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (fd_ < 0) return;
  auto it = rows_.find(tensor);
  if (it == rows_.end() || it->second.open == 0) return;  // begun before this file started
  --it->second.open;
  EndEvent(it->second.pid, ts_us ? ts_us : NowMicros());
}

void Timeline::Waited(const std::string& tensor, int64_t began_us, int64_t ended_us) {
  if (!active()) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (fd_ < 0) return;
  const int pid = RowOf(tensor).pid;
  const int64_t ts = began_us - start_us_;
  std::ostringstream s;
  s << "{\"name\": \"SYNCHRONIZE\", \"ph\": \"i\", \"s\": \"t\", \"ts\": " << (ts < 0 ? 0 : ts) << ", \"pid\": " << pid
    << ", \"tid\": 0, \"args\": {\"waited_us\": " << ended_us - began_us << "}}";
  Event(s.str());
}

void Timeline::EndEvent(int pid, int64_t ts_us) {
  int64_t ts = ts_us - start_us_;
  std::ostringstream s;
  s << "{\"ph\": \"E\", \"ts\": " << (ts < 0 ? 0 : ts) << ", \"pid\": " << pid << ", \"tid\": 0}";
  Event(s.str());
}

void Timeline::MarkCycle() {
  if (!active()) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (fd_ < 0) return;
  if (NowMicros() - last_flush_us_ >= kFlushUs) Flush();
  if (!mark_cycles_) return;
  std::ostringstream s;
  s << "{\"name\": \"CYCLE_START\", \"ph\": \"i\", \"s\": \"g\", \"ts\": " << NowMicros() - start_us_
    << ", \"pid\": 0, \"tid\": 0}";
  Event(s.str());
}

}  // namespace hvdcore
