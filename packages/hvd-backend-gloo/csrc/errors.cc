// Classifying what the transports throw (errors.h).
#include "errors.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <new>

#include <gloo/common/error.h>
#include <gloo/common/logging.h>

#include "shm/host_backend.h"

namespace hvd_gloo {
namespace {

// Gloo prefixes messages with "[path/to/file.cc:123] "; users need the text, not Gloo's build paths.
std::string StripLocation(std::string text) {
  size_t close = text.find("] ");
  if (!text.empty() && text[0] == '[' && close != std::string::npos) {
    size_t colon = text.rfind(':', close);
    bool line = colon != std::string::npos && colon + 1 < close;
    for (size_t i = colon + 1; line && i < close; ++i) line = std::isdigit(static_cast<unsigned char>(text[i]));
    if (line) text.erase(0, close + 2);
  }
  return text;
}

bool Contains(const std::string& lowered, const char* needle) { return lowered.find(needle) != std::string::npos; }

std::string Seconds(std::chrono::milliseconds timeout) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", (double)timeout.count() / 1000.0);
  return buf;
}

// Gloo has one exception type for all transport failures; its message tells a timeout ("Timed
// out waiting", "Read timeout", "Connect timeout") from a lost peer ("Connection closed by peer",
// "Socket closed", "Connection reset by peer", "Broken pipe", "Connection refused").
Failure FromTransportMessage(const std::string& raw, std::chrono::milliseconds timeout) {
  std::string text = StripLocation(raw);
  std::string lowered = text;
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return std::tolower(c); });
  if (Contains(lowered, "timed out") || Contains(lowered, "timeout")) {
    return TimedOut(timeout, "Gloo: " + text);
  }
  if (Contains(lowered, "closed") || Contains(lowered, "reset") || Contains(lowered, "broken pipe") ||
      Contains(lowered, "refused") || Contains(lowered, "eof")) {
    return PeerLost("Gloo: " + text);
  }
  return {HVD_ERR_INTERNAL, "Gloo failed: " + text};
}

}  // namespace

Failure TimedOut(std::chrono::milliseconds timeout, const std::string& detail, int32_t peer) {
  return {HVD_ERR_TIMEOUT,
          "timed out after " + Seconds(timeout) +
              " (HOROVOD_GLOO_TIMEOUT_SECONDS): a peer did not take part in time (" + detail + ")",
          peer};
}

Failure PeerLost(const std::string& detail, int32_t peer) {
  return {HVD_ERR_PEER_LOST, "lost the connection to a peer, whose process has probably stopped (" + detail + ")",
          peer};
}

Failure CurrentFailure(std::chrono::milliseconds timeout) {
  try {
    throw;
  } catch (const StoreTimeout& e) {
    return {HVD_ERR_TIMEOUT, e.what()};
  } catch (const StoreFailure& e) {
    return {HVD_ERR_INTERNAL, e.what()};
  } catch (const hvd_shm::Failure& e) {
    return {e.status, e.message, e.peer};
  } catch (const Failure& e) {  // what the backend's own connections throw (tcp/links.h)
    return e;
  } catch (const gloo::IoException& e) {
    return FromTransportMessage(e.what(), timeout);
  } catch (const gloo::EnforceNotMet& e) {
    return {HVD_ERR_INTERNAL, std::string("Gloo check failed: ") + e.what()};
  } catch (const std::bad_alloc&) {
    return {HVD_ERR_INTERNAL, "out of memory"};
  } catch (const std::exception& e) {  // gloo::Exception and the rest
    return FromTransportMessage(e.what(), timeout);
  } catch (...) {
    return {HVD_ERR_INTERNAL, "unknown exception"};
  }
}

int Fail(hvd_comm* comm, int status, std::string message) {
  comm->last_error = std::move(message);
  return status;
}

std::string FailurePrefix(const hvd_comm* comm, const char* op) {
  std::string prefix = "gloo " + std::string(op) + " (" + Describe(comm);
  if (!comm->waiting_on.empty()) {
    prefix += comm->waiting_on.size() == 1 ? ", waiting on " : ", waiting on its ring neighbours ";
    for (size_t i = 0; i < comm->waiting_on.size(); ++i) {
      if (i) prefix += " and ";
      prefix += RankName(comm, comm->waiting_on[i]);
    }
  }
  return prefix + "): ";
}

}  // namespace hvd_gloo
