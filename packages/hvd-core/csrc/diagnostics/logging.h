// Minimal leveled logging to stderr, one line per call (HOROVOD_LOG_LEVEL, HOROVOD_LOG_HIDE_TIME).
#pragma once

#include <sstream>
#include <string>

namespace hvdcore {

enum class LogLevel : int { kTrace = 0, kDebug = 1, kInfo = 2, kWarning = 3, kError = 4, kFatal = 5 };

class Logger {
 public:
  Logger(int rank, LogLevel level, bool hide_time) : rank_(rank), level_(level), hide_time_(hide_time) {}
  bool enabled(LogLevel level) const { return level >= level_; }
  void Write(LogLevel level, const std::string& message) const;
  void set_rank(int rank) { rank_ = rank; }

 private:
  int rank_;
  LogLevel level_;
  bool hide_time_;
};

}  // namespace hvdcore

// HVD_LOG(logger, kWarning) << "text";  the stream is only built when the level is enabled.
#define HVD_LOG(logger, lvl)                                                                                  \
  for (bool hvd_log_once_ = (logger).enabled(::hvdcore::LogLevel::lvl); hvd_log_once_; hvd_log_once_ = false) \
  ::hvdcore::LogLine((logger), ::hvdcore::LogLevel::lvl).stream()

namespace hvdcore {
class LogLine {
 public:
  LogLine(const Logger& logger, LogLevel level) : logger_(logger), level_(level) {}
  ~LogLine() { logger_.Write(level_, stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  const Logger& logger_;
  LogLevel level_;
  std::ostringstream stream_;
};
}  // namespace hvdcore
