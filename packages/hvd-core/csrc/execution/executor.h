// Executing negotiated responses: fusion of small allreduces into one buffer, the data movement
// of every collective through the backend, scaling, and completion of the callers' handles.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/output_pool.h"
#include "diagnostics/job_stats.h"
#include "diagnostics/logging.h"
#include "diagnostics/timeline.h"
#include "execution/device_staging.h"
#include "execution/throughput_meter.h"
#include "negotiation/controller.h"
#include "negotiation/process_set.h"

namespace hvdcore {

struct ExecutionStats {
  std::atomic<uint64_t> backend_calls[kOpTypeCount] = {};  // data movement calls, by op type
  std::atomic<uint64_t> tensors{0};
  std::atomic<uint64_t> fused_batches{0};  // allreduce calls that carried more than one tensor
  std::atomic<uint64_t> declined_buffer_calls{0};  // multi-buffer allreduces the backend handed back
  // Allreduces and allgathers done host by host (backend/hierarchical_comm.h).
  std::atomic<uint64_t> hierarchical_allreduces{0};
  std::atomic<uint64_t> hierarchical_allgathers{0};
  // Collectives queued on the device backend (NCCL).
  std::atomic<uint64_t> device_backend_calls{0};
};

// Called with each finished entry; the engine releases its name and completes its handle.
using CompleteFn = std::function<void(ProcessSet&, std::unique_ptr<TensorEntry>, Status)>;

// Which responses on device tensors go to the device backend (NCCL), and how the engine gives a
// process set its communicator on a device (made at first use; device -1: a member without the
// tensor, which the engine gives the device it uses for the set). Without `connect` (no device
// backend) every device tensor is staged through host memory.
struct DeviceRoute {
  uint32_t ops = 0;  // bit (1 << OpType) of each op type the device backend takes
  // `host`: the communicator of this host's members of the set (hierarchical allreduce) instead.
  std::function<Status(ProcessSet&, int32_t device_id, bool host, DeviceComm** out)> connect;
  bool Takes(OpType type) const { return connect && (ops >> (int)type & 1u); }
};

class Executor {
 public:
  // Large outputs come from, and go back to, `output_pool` (core/output_pool.h).
  // Device tensors are staged through `stagings` (execution/device_staging.h).
  // Device tensors go to the device backend where `route` takes them (device_collectives.cc).
  // What it does goes into `stats` (the engine's counters) and `job_stats` (the job-end report's; null: not kept).
  Executor(const Logger& log, Timeline& timeline, int64_t fusion_threshold, ExecutionStats& stats, JobStats* job_stats,
           std::shared_ptr<OutputPool> output_pool, DeviceStagings& stagings, DeviceRoute route, CompleteFn complete)
      : log_(log),
        timeline_(timeline),
        stagings_(stagings),
        route_(std::move(route)),
        fusion_threshold_(fusion_threshold),
        stats_(stats),
        job_stats_(job_stats),
        output_pool_(std::move(output_pool)),
        complete_(std::move(complete)) {}

  // Executes the cycle's responses for `ps` in order, taking their entries out of `ps.pending`
  // (the caller compacts `ps.arrival` afterwards). A non-OK status is a communication failure:
  // the engine must stop (the entries involved have already been failed with it).
  Status Execute(ProcessSet& ps, std::vector<Response> responses);
  // Completes the ops whose data arrived inline with negotiation (no backend call).
  void ExecuteInline(ProcessSet& ps, const std::vector<InlineCompletion>& completions);

  // Whether the failure Execute returned last was the device backend's (its communicator failed,
  // the engine's own connections did not), and forgets it.
  bool TakeDeviceFailure() { return std::exchange(device_failure_, false); }

  // The fusion threshold, which the autotuner changes between cycles on every rank alike.
  void SetFusionThreshold(int64_t bytes) { fusion_threshold_ = bytes; }
  ThroughputMeter& meter() { return meter_; }
  const ThroughputMeter& meter() const { return meter_; }

 private:
  // Consecutive allreduces that may share one fusion buffer become one response.
  std::vector<Response> Fuse(std::vector<Response> responses) const;
  Status Run(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries);
  // Runs a response where its data is: on the device backend (RunOnDevice), or through Run, with
  // device entries staged through pinned host memory around it.
  Status RunPlaced(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries);
  // The job-end report's counters for a response that ran from `started_us` to `ended_us`.
  void RecordJobStats(const ProcessSet& ps, const Response& r, const std::vector<std::unique_ptr<TensorEntry>>& entries,
                      int64_t started_us, int64_t ended_us);
  // The timeline's activity of each entry: negotiation ends, the op's data movement begins.
  void BeginActivity(const Response& r, const std::vector<std::unique_ptr<TensorEntry>>& entries);

  // A response on device tensors, queued on the device backend on the engine's stream of the
  // device (device_collectives.cc). Sets *declined, having queued nothing that matters, where the
  // backend leaves the op to the engine: on every member alike, which then stage it.
  Status RunOnDevice(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries,
                     bool* declined);
  Status DeviceAllreduce(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries,
                         DeviceStaging& staging, Comm& comm, bool* declined);
  // HOROVOD_HIERARCHICAL_ALLREDUCE on the device (device_hierarchical.cc): the host's ranks on the
  // device backend, across hosts on the CPU backend through pinned memory.
  Status DeviceHierarchicalAllreduce(ProcessSet& ps, const Response& r,
                                     std::vector<std::unique_ptr<TensorEntry>>& entries, DeviceStaging& staging,
                                     Comm& host, bool* declined);
  Status DeviceAllgather(ProcessSet& ps, const Response& r, std::unique_ptr<TensorEntry>& e, DeviceStaging& staging,
                         Comm& comm);
  Status DeviceBroadcast(ProcessSet& ps, const Response& r, TensorEntry* e, DeviceStaging& staging, Comm& comm);
  Status DeviceAlltoall(ProcessSet& ps, const Response& r, std::unique_ptr<TensorEntry>& e, DeviceStaging& staging,
                        Comm& comm);
  Status DeviceReducescatter(ProcessSet& ps, const Response& r, TensorEntry* e, DeviceStaging& staging, Comm& comm,
                             bool* declined);
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
  DeviceRoute route_;
  int64_t fusion_threshold_;
  ExecutionStats& stats_;
  JobStats* job_stats_;
  std::shared_ptr<OutputPool> output_pool_;
  CompleteFn complete_;
  std::vector<uint8_t> adasum_scratch_;  // what the peers' pieces arrive in (execution/adasum.h)
  ThroughputMeter meter_;
  bool device_failure_ = false;
};

}  // namespace hvdcore
