// Negotiation for one process set, run once per cycle by every member.
//
// Step 1, always: one allgather of a fixed-size record per member (record_layout.h): flags (shutdown, needs the
// coordinator, joined), the length of its new requests, one bit per cache slot it has ready, and
// inline (inline_space.h says how much room there is) the data of its small ready allreduces, the
// data of the small ready broadcasts it is the root of, and the new sizes of its ready allgathers and alltoalls whose
// first dimension or splits changed. A cached tensor every member has is ready with no further communication; if every
// member also sent its data inline, the reduction is computed locally from the gathered records (in rank order, so
// bit-identical everywhere) and the op costs this one collective in total; so does a broadcast whose root sent its data
// inline (every member copies it from the root's record); an allgather or alltoall then knows every member's sizes
// (response_cache.h) and costs its one data movement. Step 2, only when needed: the members' new requests are gathered,
// the coordinator decides and broadcasts an ordered response list (with cache erasures and, on a stall, a shutdown
// error).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "diagnostics/logging.h"
#include "diagnostics/stall_inspector.h"
#include "negotiation/process_set.h"
#include "negotiation/record_layout.h"
#include "negotiation/tuned_settings.h"

namespace hvdcore {

// An op completed inside step 1 from the gathered records. An allreduce: every member's (prescaled)
// contribution, in rank order, nullptr for members that joined (identity contribution). A
// broadcast: the root's data at parts[root], nullptr elsewhere. An allgather or alltoall: every
// member's data (its whole input), nullptr for members that joined without it; `response` holds
// every member's sizes for this cycle.
struct InlineCompletion {
  Response response;
  std::vector<const uint8_t*> parts;
};

// What this rank's record says about stopping: nothing, a normal stop, or a stop because this rank
// failed (its reason is then in the store, under StopReasonKey, before the record is sent).
enum class StopWish : uint8_t { kNone, kStop, kStopFailed };

struct CycleResult {
  std::vector<Response> responses;  // ordered, one tensor each; fusion happens when executing
  std::vector<InlineCompletion> inline_completions;
  std::vector<uint8_t> records;  // step 1's gathered records, which the inline parts point into
  bool shutdown = false;
  std::vector<int32_t> shutdown_by;  // job ranks whose record asked for the shutdown
  std::vector<int32_t> failed_by;  // of those, the ones that stop because they failed
  std::string shutdown_error;
  // Some member still has work once this cycle's ready ops have run (no member may slow its cycling
  // down): work that was not ready, waits for the coordinator, or is outside the cycle's records.
  bool anyone_busy = false;
  // Settings rank 0's record carried (epoch 0: none), which every rank applies after this cycle.
  TunedSettings settings;
};

struct NegotiationStats {
  std::atomic<uint64_t> cycles{0};
  std::atomic<uint64_t> coordinator_rounds{0};  // cycles that needed step 2
  std::atomic<uint64_t> cache_hits{0};  // tensors negotiated by the cache bits alone
  std::atomic<uint64_t> inline_reductions{0};  // of those, allreduces reduced from the inline data
  std::atomic<uint64_t> inline_broadcasts{0};  // and broadcasts copied from the root's inline data
  std::atomic<uint64_t> inline_allgathers{0};  // and allgathers and alltoalls from every member's
  std::atomic<uint64_t> inline_alltoalls{0};
  std::atomic<uint64_t> inline_space{0};  // bytes of inline space in the global set's next record
  std::atomic<uint64_t> eager_sends{0};  // cached ops whose data this member sent ahead (eager.h)
  std::atomic<uint64_t> eager_drops{0};  // eager messages (to or from this member) whose slot changed first
  std::atomic<uint64_t> eager_record_cycles{0};  // cycles whose records went over the records channel
  std::atomic<uint64_t> record_bytes_sent{0};  // what those records took on the wire, to every peer together
  std::atomic<uint64_t> busy_cycles{0};  // cycles after which some member still had work (anyone_busy)
  std::atomic<uint64_t> helped_cycles{0};  // cycles run on the thread of a caller about to wait (engine.h)
};

class Controller {
 public:
  // `inline_bytes`: the inline space every record carries; `inline_max_bytes`: what the space may
  // grow to over all the members' records together (inline_space.h).
  // Each set's rank 0 counts the members' arrivals and the stalls into `job_stats` (may be null).
  Controller(const Logger& log, int64_t inline_bytes, int64_t inline_max_bytes, JobStats* job_stats = nullptr)
      : log_(log), inline_bytes_(inline_bytes), inline_max_bytes_(inline_max_bytes), job_stats_(job_stats) {}
  // `work_elsewhere`: this rank has work outside `ps`'s pending entries (queued, or pending in other
  // sets), reported with its own so that idle peers keep cycling. `settings` (epoch > 0): tuned
  // settings this member's record carries to the others (rank 0, global set).
  Status RunCycle(ProcessSet& ps, StopWish stop, bool work_elsewhere, CycleResult* out, NegotiationStats* stats,
                  const TunedSettings& settings = {});
  // The largest record a member of `ps` may send: the records channel's space (eager.h).
  size_t MostRecordBytes(const ProcessSet& ps) const;

 private:
  // This member's pending work, sorted: requests for the coordinator, and cache hits.
  struct PendingWork {
    std::vector<Request> requests;
    std::vector<uint8_t> encoded;  // the requests, as they travel
    std::vector<std::pair<int32_t, TensorEntry*>> hits;  // (cache slot, entry), in slot order
    std::vector<bool> new_sizes;  // by slot: this member sends its changed sizes with its bit
    size_t sizes_bytes = 0;  // the inline space those sizes take
  };
  // What every member's flags say, beyond the stop and busy flags (which go into the CycleResult).
  struct MemberFlags {
    bool need_coordinator = false;
    std::vector<bool> joined;
  };
  // The cache slot each member's eager messages are for (-1: none), and its generation now.
  struct EagerClaims {
    std::vector<int32_t> slot_of;
    std::vector<uint64_t> generation;
  };

  // The phases of RunCycle, in order.
  PendingWork SortPending(ProcessSet& ps, int64_t now, size_t inline_space) const;
  Status WriteRecord(ProcessSet& ps, StopWish stop, bool work_elsewhere, const PendingWork& work, bool stalled,
                     const RecordLayout& layout, size_t inline_space, uint8_t* record, NegotiationStats* stats) const;
  Status GatherRecords(ProcessSet& ps, const std::vector<uint8_t>& record, std::vector<uint8_t>* all);
  static MemberFlags ReadFlags(const ProcessSet& ps, const RecordLayout& layout, CycleResult* out);
  static Status ReadEagerClaims(ProcessSet& ps, const RecordLayout& layout, const std::vector<uint8_t>& records,
                                EagerClaims* eager);
  Status DecideCacheSlots(ProcessSet& ps, const RecordLayout& layout, const std::vector<bool>& joined,
                          size_t most_inline, EagerClaims* eager, CycleResult* out, NegotiationStats* stats,
                          std::vector<bool>* ran, size_t* inline_wanted) const;
  Status Coordinate(ProcessSet& ps, const std::vector<uint8_t>& encoded, const std::vector<size_t>& counts,
                    const std::string& stall_error, int64_t now, CycleResult* out);
  Status SettleOrphanedEager(ProcessSet& ps, const std::vector<int32_t>& eager_of,
                             const std::vector<uint64_t>& generation, NegotiationStats* stats);

  Request MakeRequest(const ProcessSet& ps, const TensorEntry& e, bool invalidate) const;
  size_t MostInline(int32_t set_size) const;
  const Logger& log_;
  int64_t inline_bytes_;
  int64_t inline_max_bytes_;
  JobStats* job_stats_;
};

}  // namespace hvdcore
