// Turning the transports' exceptions into hvd_status codes and last_error messages.
//
// Every call into a transport runs inside Guarded(): Gloo reports failures by throwing
// (gloo::IoException for transport errors and timeouts, gloo::EnforceNotMet for violated
// preconditions), the shared-memory transport throws hvd_shm::Failure, the backend's own
// connections (tcp/links.h: eager messages, direct transfers) throw Failure itself, and no exception may cross
// the C ABI. A failed Gloo context cannot be used again, nor can members out of step on shared
// memory, so the first failure marks the communicator broken and later calls fail at once with the
// same status.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

#include "comm.h"

namespace hvd_gloo {

// Thrown by the store adapter: the engine's store did not produce a key in time.
struct StoreTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Thrown by the store adapter: the engine's store failed.
struct StoreFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Failure {
  int status;
  std::string message;
  int32_t peer = -1;  // the member the call was waiting on, when the exception names it
};

// The failures every transport reports alike: a peer that did not take part within `timeout`, and
// a lost connection; `detail` says where (the transport's own words), `peer` whom, when known.
Failure TimedOut(std::chrono::milliseconds timeout, const std::string& detail, int32_t peer = -1);
Failure PeerLost(const std::string& detail, int32_t peer = -1);

// Classifies the exception currently being handled (call only inside a catch block).
Failure CurrentFailure(std::chrono::milliseconds timeout);

// Records `message` as the communicator's last error and returns `status`.
int Fail(hvd_comm* comm, int status, std::string message);

// "gloo allreduce (rank 0 of 2): " plus the peers the call was waiting on, for failure messages.
std::string FailurePrefix(const hvd_comm* comm, const char* op);

// Runs `fn` (which calls the transport) for operation `op` on `comm`; returns HVD_OK or the failure
// status.
template <typename Fn>
int Guarded(hvd_comm* comm, const char* op, Fn&& fn) {
  if (comm->broken_status != HVD_OK) {
    return Fail(comm, comm->broken_status,
                "gloo " + std::string(op) + " (" + Describe(comm) +
                    "): the communicator is unusable after an earlier failure: " + comm->broken_reason);
  }
  comm->waiting_on.clear();
  try {
    std::forward<Fn>(fn)();
    return HVD_OK;
  } catch (...) {
    Failure f = CurrentFailure(comm->timeout);
    if (f.peer >= 0) comm->waiting_on = {f.peer};
    std::string message = FailurePrefix(comm, op) + f.message;
    comm->broken_status = f.status;
    comm->broken_reason = message;
    return Fail(comm, f.status, std::move(message));
  }
}

}  // namespace hvd_gloo
