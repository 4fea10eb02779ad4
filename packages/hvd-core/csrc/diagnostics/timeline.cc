#include "diagnostics/timeline.h"

#include <cerrno>
#include <cstring>
#include <sstream>

namespace hvdcore {
namespace {

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

Status Timeline::Start(const std::string& path, bool mark_cycles) {
  std::lock_guard<std::mutex> lk(mu_);
  CloseFile();
  file_ = fopen(path.c_str(), "w");
  if (!file_) return Status::InvalidArgument("cannot open timeline file '" + path + "': " + strerror(errno));
  fputs("[\n", file_);
  first_event_ = true;
  rows_.clear();
  mark_cycles_ = mark_cycles;
  start_us_ = NowMicros();
  active_.store(true);
  return Status::Ok();
}

void Timeline::Stop() {
  std::lock_guard<std::mutex> lk(mu_);
  active_.store(false);
  CloseFile();
}

void Timeline::CloseFile() {
  if (!file_) return;
  int64_t now = NowMicros();
  for (auto& [tensor, row] : rows_) {
    for (; row.open > 0; --row.open) EndEvent(row.pid, now);
  }
  fputs("\n]\n", file_);  // a closed array: strict JSON parsers accept the file
  fclose(file_);
  file_ = nullptr;
}

void Timeline::Event(const std::string& json) {
  if (!file_) return;
  if (!first_event_) fputs(",\n", file_);
  first_event_ = false;
  fputs(json.c_str(), file_);
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
  if (!file_) return;
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
  if (!file_) return;
  auto it = rows_.find(tensor);
  if (it == rows_.end() || it->second.open == 0) return;  // begun before this file started
  --it->second.open;
  EndEvent(it->second.pid, ts_us ? ts_us : NowMicros());
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
  if (!file_ || !mark_cycles_) return;
  std::ostringstream s;
  s << "{\"name\": \"CYCLE_START\", \"ph\": \"i\", \"s\": \"g\", \"ts\": " << NowMicros() - start_us_
    << ", \"pid\": 0, \"tid\": 0}";
  Event(s.str());
}

}  // namespace hvdcore
