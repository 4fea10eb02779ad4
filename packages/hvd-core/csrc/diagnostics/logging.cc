#include "diagnostics/logging.h"

#include <sys/time.h>
#include <cstdio>
#include <ctime>

namespace hvdcore {

static const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return "TRACE";
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARNING";
    case LogLevel::kError: return "ERROR";
    case LogLevel::kFatal: return "FATAL";
  }
  return "?";
}

void Logger::Write(LogLevel level, const std::string& message) const {
  char stamp[64] = "";
  if (!hide_time_) {
    timeval tv;
    gettimeofday(&tv, nullptr);
    tm t;
    localtime_r(&tv.tv_sec, &t);
    size_t n = strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &t);
    snprintf(stamp + n, sizeof stamp - n, ".%06ld ", (long)tv.tv_usec);
  }
  // One fprintf per line so lines from several ranks sharing a terminal stay whole.
  fprintf(stderr, "[%s%s hvd rank %d] %s\n", stamp, LevelName(level), rank_, message.c_str());
  fflush(stderr);
}

}  // namespace hvdcore
