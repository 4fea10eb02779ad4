// The engine: one per process by default, several in one process in tests.
//
// Callers enqueue operations and get handles; one background thread (no Python on it) drains the
// queue, runs negotiation for each process set it belongs to, and executes what is ready. A caller
// that starts to wait while that thread is between cycles runs the cycle itself instead
// (HelpWithCycle): one thread at a time runs the loop's iterations, whichever it is. The
// thread starts a cycle once a caller waits for submitted work, or one cycle time after the work
// arrived (AwaitWork); otherwise it takes part in a cycle every HOROVOD_CYCLE_TIME
// while any rank has work pending (so such peers never wait on it longer than that), sooner when
// a caller is blocked waiting and negotiations are cheap (engine/cycle_pacer.h), and less often,
// down to one cycle every 16 cycle times, while the whole job is idle.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/backend_loader.h"
#include "backend/kv_store.h"
#include "core/output_pool.h"
#include "diagnostics/failure_report.h"
#include "diagnostics/logging.h"
#include "diagnostics/timeline.h"
#include "engine/cycle_pacer.h"
#include "execution/executor.h"
#include "negotiation/controller.h"
#include "negotiation/process_set.h"

namespace hvdcore {

struct EngineConfig {
  int32_t rank = 0;
  int32_t size = 1;
  std::string key_prefix = "hvd";  // unique per job and initialisation; store keys start with it
  int64_t fusion_threshold = 128ll * 1024 * 1024;
  double cycle_time_ms = 1.0;
  int32_t cache_capacity = 1024;
  int64_t inline_bytes = 1024;  // per member and cycle: small cached allreduces and broadcasts travel with negotiation
  int64_t inline_max_bytes = 128 * 1024;  // how much that space may grow by, over all members (inline_space.h)
  int64_t eager_bytes = 4 << 20;  // the most a member sends a peer ahead of negotiation (negotiation/eager.h)
  int64_t output_pool_bytes = 1ll << 30;  // freed large outputs kept for reuse (core/output_pool.h)
  bool stall_check_enabled = true;
  bool job_stats_enabled = true;  // the job-end report's counters (diagnostics/job_stats.h)
  double stall_check_s = 60.0;
  double stall_shutdown_s = 0.0;
  std::string timeline_path;  // empty: no timeline at start
  bool timeline_mark_cycles = false;
  int64_t timeline_max_bytes = 0;  // the timeline file's size cap (0: none)
  // Every rank writes its own timeline, at timeline_path + ".rank<N>" (else rank 0 alone, at the path).
  bool timeline_all_ranks = false;
  // The timeline at timeline_path covers training steps [from, to) as this rank counts them
  // (execution/throughput_meter.h): from 0, it starts with the engine; to -1, it runs to the end.
  int64_t timeline_steps_from = 0;
  int64_t timeline_steps_to = -1;
  int log_level = (int)LogLevel::kWarning;
  bool log_hide_time = false;
  int64_t timeout_ms = 30000;
  bool dynamic_process_sets = false;
  std::vector<std::vector<int32_t>> process_sets;  // static sets, ids 1..n in this order
  // Where a launcher describes a lost rank in the store (diagnostics/failure_report.h); empty: no launcher.
  std::string failure_report_key;
  int64_t failure_report_wait_ms = 3000;
  // HOROVOD_HIERARCHICAL_ALLREDUCE: the global set's allreduces go host by host
  // (backend/hierarchical_comm.h). Ranks are grouped by host_key (equal on one host) and
  // local_rank.
  bool hierarchical_allreduce = false;
  bool hierarchical_allgather = false;  // HOROVOD_HIERARCHICAL_ALLGATHER, likewise
  std::string host_key;
  int32_t local_rank = 0;
  // HOROVOD_DEVICE: the device layer device tensors use (device/device.h): "cuda" (also when
  // empty) or "simulated". Loaded at the first device tensor.
  std::string device;
  // HOROVOD_GPU_OPERATIONS and its per-op variants: bit (1 << OpType) of each collective whose
  // device tensors go to the device backend (when the engine has one) instead of being staged.
  uint32_t device_ops = 0;
  // HOROVOD_NCCL_TIMEOUT: the device backend's bound on queued work (its communicators' timeout_ms).
  int64_t device_timeout_ms = 300000;
  // HOROVOD_THREAD_AFFINITY: the core the engine's thread is pinned to (this rank's entry of the
  // list); -1 leaves it to the scheduler.
  int32_t thread_affinity = -1;
  // HOROVOD_AUTOTUNE: settings change while the job runs (ProposeSettings); the host-by-host
  // communicators are made wherever the job spans hosts, so that hierarchical collectives can be
  // switched on, and rank 0 counts training steps (execution/throughput_meter.h).
  bool autotune = false;
};

// The tuned settings in force, and the global set's cycle (counted from the start, equal on every
// rank) at the end of which they took effect: 0 for the settings the engine started with.
struct AppliedSettings {
  TunedSettings settings;
  uint64_t cycle = 0;
};

struct ProcessSetInfo {
  int32_t id;
  std::vector<int32_t> ranks;
};

class Engine {
 public:
  // `device_backend` (optional: NCCL) takes device tensors' collectives (config.device_ops); without
  // it they are staged through host memory on `backend`.
  Engine(EngineConfig config, std::shared_ptr<Backend> backend, std::shared_ptr<KVStore> store,
         std::shared_ptr<Backend> device_backend = nullptr);
  ~Engine();

  // Connects the global and static process sets and starts the background thread. Collective:
  // every rank must call it. Throws StatusError.
  void Start();
  // Stops this engine and, through negotiation, every peer's (Horovod's semantics). Idempotent.
  void Shutdown();
  bool running();

  // Submits an operation. Throws StatusError (kInvalidArgument for misuse, kAborted when stopped).
  // `on_complete`, if given, is called when the operation completes, on the thread running the
  // engine's cycle (its own, or a caller's: HelpWithCycle).
  std::shared_ptr<HandleState> Enqueue(std::unique_ptr<TensorEntry> entry,
                                       HandleState::OnComplete on_complete = nullptr);
  // Negotiates a member of a group that this rank could not submit (refused at submission, here or
  // in a framework's own checks), so that its partners are not left waiting for it: the coordinator
  // answers it with an error carrying `why`, and the rest of the group runs. Nothing happens when
  // the name is already in flight (Enqueue refused it itself) or the group is not a group.
  void Refuse(OpType type, const std::string& name, int32_t process_set_id, int64_t group_id, int32_t group_size,
              const std::string& why);
  std::shared_ptr<HandleState> AddProcessSet(std::vector<int32_t> ranks);
  std::shared_ptr<HandleState> RemoveProcessSet(int32_t id);
  std::vector<ProcessSetInfo> ProcessSets();
  int32_t ProcessSetSize(int32_t id);
  int32_t ProcessSetRank(int32_t id);

  void StartTimeline(const std::string& path, bool mark_cycles);
  // Where this rank writes the timeline asked for at `path` (its own file when every rank writes one).
  std::string TimelinePath(const std::string& path) const;
  void StopTimeline();

  // Autotuning (negotiation/tuned_settings.h). On rank 0: `settings` for every rank, sent in its
  // next record of the global set and applied everywhere at the end of that cycle; returns the
  // epoch it is numbered with. Elsewhere throws StatusError (kInvalidArgument).
  uint32_t ProposeSettings(TunedSettings settings);
  AppliedSettings CurrentSettings();
  // The bytes this rank's collectives moved, and (rank 0, autotuning) where the last training step began.
  uint64_t MovedBytes() const { return executor_.meter().bytes(); }
  ThroughputMeter::StepMark LastStep() const { return executor_.meter().LastStep(); }

  const EngineConfig& config() const { return config_; }
  const Backend& backend() const { return *backend_; }
  const Backend* device_backend() const { return device_backend_.get(); }
  const NegotiationStats& negotiation_stats() const { return negotiation_stats_; }
  const ExecutionStats& execution_stats() const { return execution_stats_; }
  const JobStats& job_stats() const { return job_stats_; }
  const OutputPool& output_pool() const { return *output_pool_; }
  int blocked_callers() const { return bell_->blocked(); }

 private:
  void Loop();
  // Names the engine's thread, and pins it where HOROVOD_THREAD_AFFINITY says.
  void NameAndPin(std::thread& t);
  // Waits, holding mu_ through `lk`, for the next cycle: up to `wait` while nothing is submitted.
  // Submitted operations start a cycle as soon as a caller starts to block waiting for a result
  // (after the first of them was submitted), and one cycle time after the first of them at the
  // latest. A caller submits many operations at once (a fusion round, the gradients of a backward
  // pass) one every few microseconds: a cycle started at the first would negotiate them over
  // several cycles, taking the core the caller submits from. A caller that blocks has submitted
  // everything it will for now. (A caller that polls instead, or a backward pass that submits
  // while it computes, sees its work start within one cycle time, as Horovod's loop, which sleeps
  // out each cycle, does.)
  // Also returns once an iteration ran elsewhere after the `seen`-th (a caller's, which set the
  // pace anew) or the loop stopped.
  void AwaitWork(std::unique_lock<std::mutex>& lk, std::chrono::microseconds wait, uint64_t seen);
  static constexpr std::chrono::microseconds kWatchForCaller{50};
  // Why the loop stopped: it decides what the error says and whether the launcher is asked.
  enum class StopCause { kThisRank, kStall, kPeerShutdown, kTransport };
  Status RunSet(ProcessSet& ps, StopWish wish, bool* stop, bool* anyone_busy, StopCause* cause,
                const TunedSettings& outgoing);
  // Tuned settings that arrived in this iteration's global cycle, at its end (requires cycle_mu_).
  void ApplySettings(const TunedSettings& settings);
  // One iteration of the loop, with cycle_mu_ held: takes what was submitted, runs a cycle of every
  // process set this rank is in, and sets the wait before the next. Returns whether anyone still
  // has work.
  bool RunIteration();
  // A caller's offer, as it starts to wait (CallerBell::Help): when the loop is between cycles and
  // operations are queued, runs the iteration that takes them on this thread, which is what the
  // caller's blocking would have woken the loop for. Returns whether it ran one. At most one: a
  // caller whose work then still waits on peers waits as before, within reach of its signals,
  // while the loop paces the cycles. Completion callbacks of that iteration run on this thread.
  // Not where records go by collectives (MPI, shared memory), nor for process-set changes.
  bool HelpWithCycle();
  Status ExecuteCycle(ProcessSet& ps, CycleResult& result);
  Status Connect(ProcessSet& ps);
  // Creates a communicator of `ranks` in which this rank is member `my_index`, keys under `key`.
  Status ConnectRanks(const std::vector<int32_t>& ranks, int32_t my_index, const std::string& key,
                      std::unique_ptr<Comm>* out);
  Status ConnectHierarchy(ProcessSet& global);
  Status CheckConfigAgreement();
  Status ApplyProcessSetChange(const Response& r);
  std::string NextProcessSetChangeName();
  void Complete(ProcessSet& ps, std::unique_ptr<TensorEntry> entry, Status status);
  // The device layer, loaded for the first device tensor (requires mu_); null, with the reason in
  // device_error_, when it cannot be had.
  const hvd_device_v1* Device();
  // The set's device backend communicator on `device_id` (-1: the device this rank uses for the
  // set), or its host's members' (`host`), made at first use (DeviceRoute::connect).
  Status ConnectDevice(ProcessSet& ps, int32_t device_id, bool host, DeviceComm** out);
  // Failures of work queued on the device backend (backend/device_comm.h), for the sets in `sets`.
  Status WatchDeviceWork(const std::vector<ProcessSet*>& sets);
  // A device failure (NCCL's asynchronous error) stops this rank at the next global cycle, which
  // carries it to every rank (its message published in the store): stopping at once would leave
  // the peers waiting on this rank's negotiation until their timeout.
  void StopAfterDeviceFailure(const Status& failure);
  // HOROVOD_TIMELINE_STEPS: starts or stops the timeline file as step `steps` begins.
  void FollowTimelineWindow(uint64_t steps);
  // The timeline at config_.timeline_path, where this rank writes one.
  void StartConfiguredTimeline();
  // Starts this rank's timeline file for `path` (where this rank writes one).
  Status OpenTimeline(const std::string& path, bool mark_cycles);
  // Records a device entry's ready event on the caller's stream (requires mu_).
  Status MarkReady(TensorEntry& e);
  // Queues a refused group member in `ps` (requires mu_, through `lk`, which it may release).
  void QueueRefusal(std::unique_lock<std::mutex>& lk, ProcessSet& ps, OpType type, const std::string& name,
                    int64_t group_id, int32_t group_size, const std::string& why);
  // Puts `e` on the queue (requires mu_); returns whether the loop must be woken for it.
  bool Push(std::unique_ptr<TensorEntry> e);
  // Fails every pending operation; when peers caused the stop, the launcher's report of a lost
  // rank is looked up and added to the error (diagnostics/failure_report.h).
  void FailEverything(const Status& status, StopCause cause);
  ProcessSet* FindSet(int32_t id);  // requires mu_

  EngineConfig config_;
  Logger log_;
  std::shared_ptr<Backend> backend_;
  std::shared_ptr<Backend> device_backend_;
  std::shared_ptr<KVStore> store_;
  StallInspector stall_settings_;
  // Shared with the handles, which note their callers' waits in it and may outlive the engine.
  std::shared_ptr<Timeline> timeline_ = std::make_shared<Timeline>();
  NegotiationStats negotiation_stats_;
  ExecutionStats execution_stats_;
  JobStats job_stats_;  // before controller_ and executor_, which count into it
  std::shared_ptr<OutputPool> output_pool_;  // before executor_, which hands it to outputs
  DeviceStagings stagings_;  // before executor_, which stages through it
  Controller controller_;
  Executor executor_;
  std::atomic<std::chrono::microseconds> cycle_;  // HOROVOD_CYCLE_TIME, or the autotuner's
  std::shared_ptr<CallerBell> bell_ = std::make_shared<CallerBell>();

  // Held by the thread running an iteration (the loop's or a helping caller's); guards what only
  // iterations touch: the pace, the stop, and the process sets' negotiation state.
  std::mutex cycle_mu_;
  CyclePacer pacer_;
  std::chrono::microseconds idle_wait_;  // before the next iteration while nothing is submitted
  std::chrono::steady_clock::time_point last_iteration_end_ = std::chrono::steady_clock::now();
  Status failure_;  // of the iteration that stopped the loop
  StopCause cause_ = StopCause::kThisRank;
  std::atomic<uint64_t> iterations_{0};
  uint64_t global_cycles_ = 0;  // negotiations of the global set, counted alike on every rank
  TunedSettings arrived_;  // in this iteration's global cycle (epoch 0: none)
  std::atomic<bool> stopped_{false};  // an iteration stopped the loop: it ends and fails what is left
  std::atomic<bool> helping_{false};  // a caller is running an iteration (the loop stops watching)
  std::atomic<std::thread::id> cycle_owner_{};  // who holds cycle_mu_: its callbacks must not help

  std::mutex settings_mu_;  // guards applied_ (read by any thread, written by iterations)
  AppliedSettings applied_;

  std::mutex mu_;  // guards everything below
  TunedSettings proposed_;  // rank 0: not yet sent (epoch 0: none)
  uint32_t last_epoch_ = 0;
  const hvd_device_v1* device_ = nullptr;
  std::shared_ptr<EventPool> events_;  // the device's, for ready and completion events
  bool device_loaded_ = false;
  std::string device_error_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<TensorEntry>> queue_;
  std::map<int32_t, std::unique_ptr<ProcessSet>> sets_;  // structure changed only by the loop
  std::vector<int32_t> sets_to_remove_;
  int32_t next_set_id_ = 1;
  uint64_t process_set_requests_ = 0;
  // Process-set changes submitted and not yet completed (queued or being negotiated): while there
  // are any, callers do not run cycles (HelpWithCycle).
  int32_t set_changes_in_flight_ = 0;
  bool started_ = false;
  bool running_ = false;
  bool shutdown_requested_ = false;
  bool loop_waiting_ = false;  // the loop sleeps on cv_: only then does Enqueue need to wake it
  std::chrono::steady_clock::time_point loop_wakes_at_;  // when it wakes by itself, while queue_ is empty
  std::chrono::steady_clock::time_point first_enqueue_;  // of the operations now in queue_
  uint64_t rings_at_first_enqueue_ = 0;  // bell_->rings() then
  Status stop_status_;
  Status deferred_failure_;  // raised once the global set stops: a process set's stall, a device failure
  StopCause deferred_cause_ = StopCause::kStall;
  std::thread thread_;
};

}  // namespace hvdcore
