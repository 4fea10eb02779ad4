// What one rank's engine did over the whole job, for the job-end report (horovod.common.job_report):
// time and bytes of its collectives by op type, the wait for peers before each one could run, its
// slowest tensors, fused buffers, stalls, and, on each process set's rank 0 (which sees every
// member's arrival), which member arrived last at each collective and by how much.
//
// Counters only: the engine thread adds to them as it goes (one short lock per response), nothing
// is sent anywhere until the report is asked for at the end.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/common.h"

namespace hvdcore {

class JobStats {
 public:
  // Distinct tensor names kept per process set; later ones are counted under kOtherTensors, so that
  // a job that names every step's tensors anew cannot grow the counters without bound.
  static constexpr size_t kMostTensors = 4096;
  static constexpr const char* kOtherTensors = "(other tensors)";

  struct OpTotals {
    uint64_t count = 0;  // tensors
    uint64_t bytes = 0;
    int64_t time_us = 0;  // executing them (fused tensors share their batch's time)
  };
  struct TensorTotals {
    uint64_t count = 0;
    uint64_t bytes = 0;
    int64_t total_us = 0;  // submission to completion
    int64_t most_us = 0;
    int64_t wait_us = 0;  // submission to the start of execution: negotiation and peers
  };
  // A member's arrivals at the collectives of one set, seen by the set's rank 0 (its clock).
  struct Lateness {
    uint64_t last = 0;  // collectives it arrived at last (with more than the others' spread)
    int64_t late_us = 0;  // summed: how long after the first member it arrived, when last
    int64_t most_us = 0;
    std::string most_tensor;
  };
  struct SetTotals {
    OpTotals ops[kOpTypeCount];
    int64_t wait_us = 0;
    std::unordered_map<std::string, TensorTotals> tensors;
    std::map<int32_t, Lateness> lateness;  // by job rank
    uint64_t arrivals = 0;  // collectives whose arrivals were measured
    uint64_t stalls = 0;  // stall warnings
    std::map<std::string, uint64_t> stalled_tensors;
  };
  struct Snapshot {
    std::map<int32_t, SetTotals> sets;  // by process set id
    uint64_t fused_buffers = 0;
    uint64_t fused_bytes = 0;
    uint64_t most_fused_bytes = 0;
  };

  // A response of `type` on `bytes` ran for `time_us` (engine thread).
  void RecordOp(int32_t set_id, OpType type, uint64_t tensors, uint64_t bytes, int64_t time_us);
  // One tensor completed: `wait_us` from its submission to the start of its execution.
  void RecordTensor(int32_t set_id, const std::string& name, uint64_t bytes, int64_t wait_us, int64_t total_us);
  void RecordFusedBuffer(uint64_t bytes);
  // Every member of the set had arrived at `tensor`: `last` (job rank) came `late_us` after the first.
  void RecordArrival(int32_t set_id, const std::string& tensor, int32_t last, int64_t late_us);
  void RecordStall(int32_t set_id, const std::vector<std::string>& tensors);

  Snapshot Take() const;

 private:
  mutable std::mutex mu_;
  Snapshot totals_;
};

// Arrival times of one process set's members at the collectives not yet ready, kept by the set's
// rank 0 from the records it gathers each cycle (negotiation/controller.cc) and the requests its
// coordinator takes (negotiation/coordinator.cc). The clock is rank 0's: no clocks are compared.
class Arrivals {
 public:
  // The members with `has` set (by process-set rank) have `tensor` ready as of `now_us` (each one's
  // first sighting counts). Once `everyone` has, the last one's lateness goes to `stats` (as a job
  // rank, from `job_ranks`) and the tensor is forgotten; all in one cycle, nothing is kept at all.
  void Observe(const std::string& tensor, const std::vector<bool>& has, bool everyone, int64_t now_us, int32_t set_id,
               const std::vector<int32_t>& job_ranks, JobStats* stats);

 private:
  std::unordered_map<std::string, std::vector<int64_t>> seen_;  // key -> first sighting per member (0: not yet)
};

}  // namespace hvdcore
