// Negotiation for one process set, run once per cycle by every member.
//
// Step 1, always: one allreduce (MAX over bytes) of a small control vector carrying the shutdown
// flag, whether anyone needs the coordinator, each member's message length, and two bytes per
// cache slot ("someone is not ready", "someone has it"). Tensors whose slot everybody has are
// ready with no further communication: that is the whole negotiation for tensors seen before.
// Step 2, only when needed: the members' new requests are gathered, the coordinator decides and
// broadcasts an ordered response list (with cache erasures and, on a stall, a shutdown error).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "logging.h"
#include "process_set.h"
#include "stall_inspector.h"

namespace hvdcore {

struct CycleResult {
  std::vector<Response> responses;  // ordered, one tensor each; fusion happens when executing
  bool shutdown = false;
  std::string shutdown_error;
};

struct NegotiationStats {
  std::atomic<uint64_t> cycles{0};
  std::atomic<uint64_t> coordinator_rounds{0};  // cycles that needed step 2
  std::atomic<uint64_t> cache_hits{0};          // tensors negotiated by the bit-vector alone
};

class Controller {
 public:
  explicit Controller(const Logger& log) : log_(log) {}
  Status RunCycle(ProcessSet& ps, bool want_shutdown, CycleResult* out, NegotiationStats* stats);

 private:
  Request MakeRequest(const ProcessSet& ps, const TensorEntry& e, bool invalidate) const;
  const Logger& log_;
};

}  // namespace hvdcore
