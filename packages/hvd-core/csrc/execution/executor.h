// Executing negotiated responses: fusion of small allreduces into one buffer, the data movement
// of every collective through the backend, scaling, and completion of the callers' handles.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "core/output_pool.h"
#include "diagnostics/logging.h"
#include "diagnostics/timeline.h"
#include "execution/device_staging.h"
#include "negotiation/controller.h"
#include "negotiation/process_set.h"

namespace hvdcore {

struct ExecutionStats {
  std::atomic<uint64_t> backend_calls[kOpTypeCount] = {};  // data movement calls, by op type
  std::atomic<uint64_t> tensors{0};
  std::atomic<uint64_t> fused_batches{0};  // allreduce calls that carried more than one tensor
  std::atomic<uint64_t> declined_buffer_calls{0};  // multi-buffer allreduces the backend handed back
  std::atomic<uint64_t> hierarchical_allreduces{0};  // allreduces done host by host (hierarchical_comm.h)
};

// Called with each finished entry; the engine releases its name and completes its handle.
using CompleteFn = std::function<void(ProcessSet&, std::unique_ptr<TensorEntry>, Status)>;

class Executor {
 public:
  // Large outputs come from, and go back to, `output_pool` (core/output_pool.h).
  // Device tensors are staged through `stagings` (execution/device_staging.h).
  Executor(const Logger& log, Timeline& timeline, int64_t fusion_threshold, ExecutionStats& stats,
           std::shared_ptr<OutputPool> output_pool, DeviceStagings& stagings, CompleteFn complete)
      : log_(log),
        timeline_(timeline),
        stagings_(stagings),
        fusion_threshold_(fusion_threshold),
        stats_(stats),
        output_pool_(std::move(output_pool)),
        complete_(std::move(complete)) {}

  // Executes the cycle's responses for `ps` in order, taking their entries out of `ps.pending`
  // (the caller compacts `ps.arrival` afterwards). A non-OK status is a communication failure:
  // the engine must stop (the entries involved have already been failed with it).
  Status Execute(ProcessSet& ps, std::vector<Response> responses);
  // Completes the ops whose data arrived inline with negotiation (no backend call).
  void ExecuteInline(ProcessSet& ps, const std::vector<InlineCompletion>& completions);

 private:
  // Consecutive allreduces that may share one fusion buffer become one response.
  std::vector<Response> Fuse(std::vector<Response> responses) const;
  Status Run(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries);
  // Run, with device entries staged through pinned host memory around it.
  Status RunStaged(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries);
  Status Allreduce(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries);
  // One buffer's allreduce on the set's communicator, or host by host (ps.hierarchy).
  Status ReduceAll(ProcessSet& ps, const void* send, void* recv, size_t count, hvd_dtype dtype, hvd_reduce_op op);
  // Through a backend that reduces several buffers, scaled, in one call: each tensor is read and
  // written where it is, with no fusion buffer and no scaling pass of the engine's.
  Status AllreduceWhereTheyAre(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries,
                               hvd_reduce_op op, double post, bool* declined);
  // Checks the sizes an allgather or alltoall response carries against this member's entry; may
  // hand the entry back to ps.pending (then `e` is null), see there.
  Status CheckSizes(ProcessSet& ps, const Response& r, std::unique_ptr<TensorEntry>& e) const;
  Status Allgather(ProcessSet& ps, const Response& r, std::unique_ptr<TensorEntry>& e);
  Status Broadcast(ProcessSet& ps, const Response& r, TensorEntry* e);
  Status Alltoall(ProcessSet& ps, const Response& r, std::unique_ptr<TensorEntry>& e);
  // An alltoall some of whose members sent their blocks ahead of negotiation (r.eager_from).
  Status AlltoallWithEager(ProcessSet& ps, const Response& r, const TensorEntry* e, std::vector<size_t> send_counts,
                           std::vector<size_t> recv_counts, uint8_t* out);
  Status Reducescatter(ProcessSet& ps, const Response& r, TensorEntry* e);

  const Logger& log_;
  Timeline& timeline_;
  DeviceStagings& stagings_;
  int64_t fusion_threshold_;
  ExecutionStats& stats_;
  std::shared_ptr<OutputPool> output_pool_;
  CompleteFn complete_;
};

}  // namespace hvdcore
