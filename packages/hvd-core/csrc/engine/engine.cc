#include "engine/engine.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "device/device.h"
#include "engine/validation.h"

namespace hvdcore {

Engine::Engine(EngineConfig config, std::shared_ptr<Backend> backend, std::shared_ptr<KVStore> store,
               std::shared_ptr<Backend> device_backend)
    : config_(std::move(config)),
      log_(config_.rank, (LogLevel)config_.log_level, config_.log_hide_time),
      backend_(std::move(backend)),
      device_backend_(std::move(device_backend)),
      store_(std::move(store)),
      stall_settings_(config_.stall_check_enabled, config_.stall_check_s, config_.stall_shutdown_s),
      output_pool_(std::make_shared<OutputPool>((size_t)std::max<int64_t>(0, config_.output_pool_bytes))),
      controller_(log_, config_.inline_bytes, config_.inline_max_bytes,
                  config_.job_stats_enabled ? &job_stats_ : nullptr),
      executor_(log_, *timeline_, config_.fusion_threshold, execution_stats_,
                config_.job_stats_enabled ? &job_stats_ : nullptr, output_pool_, stagings_,
                DeviceRoute{device_backend_ ? config_.device_ops : 0u,
                            [this](ProcessSet& ps, int32_t device_id, bool host, DeviceComm** out) {
                              return ConnectDevice(ps, device_id, host, out);
                            }},
                [this](ProcessSet& ps, std::unique_ptr<TensorEntry> e, Status s) {
                  Complete(ps, std::move(e), std::move(s));
                }),
      cycle_(std::chrono::microseconds(std::max<int64_t>(1, (int64_t)(config_.cycle_time_ms * 1000)))),
      pacer_(cycle_.load()),
      idle_wait_(cycle_.load()) {
  applied_.settings.cycle_time_us = (uint32_t)cycle_.load().count();
  applied_.settings.fusion_threshold = config_.fusion_threshold;
  applied_.settings.hierarchical_allreduce = config_.hierarchical_allreduce;
  applied_.settings.hierarchical_allgather = config_.hierarchical_allgather;
  if (config_.autotune && config_.rank == 0) executor_.meter().EnableSteps();
  if (!config_.timeline_path.empty() && (config_.timeline_steps_from > 0 || config_.timeline_steps_to >= 0)) {
    executor_.meter().EnableSteps([this](uint64_t steps) { FollowTimelineWindow(steps); });
  }
  bell_->Attach(
      [this] {
        std::lock_guard<std::mutex> lk(mu_);
        cv_.notify_one();
      },
      [this] { return HelpWithCycle(); });
}

Engine::~Engine() {
  bell_->Detach();  // handles outlive the engine: their callers must no longer wake it or help it
  Shutdown();
}

Status Engine::Connect(ProcessSet& ps) {
  if (!ps.member()) return Status::Ok();
  Status st = ConnectRanks(ps.ranks, ps.my_rank, "ps" + std::to_string(ps.id), &ps.comm);
  if (!st.ok()) return st;
  return OpenEager(ps.comm.get(), controller_.MostRecordBytes(ps), (size_t)config_.eager_bytes, &ps.records, &ps.eager);
}

Status Engine::ConnectRanks(const std::vector<int32_t>& ranks, int32_t my_index, const std::string& key,
                            std::unique_ptr<Comm>* out) {
  std::vector<int32_t> job_ranks = ranks;
  std::string prefix = config_.key_prefix + "/" + key;
  hvd_comm_config_v1 cc{};
  cc.struct_size = sizeof cc;
  cc.rank = my_index;
  cc.size = (int32_t)job_ranks.size();
  cc.job_ranks = job_ranks.data();
  cc.key_prefix = prefix.c_str();
  cc.timeout_ms = config_.timeout_ms;
  cc.device_kind = HVD_DEVICE_CPU;
  cc.device_id = -1;
  return Comm::Create(backend_, cc, store_->c_store(), out);
}

Status Engine::ConnectDevice(ProcessSet& ps, int32_t device_id, bool host, DeviceComm** out) {
  const hvd_device_v1* device;
  {
    std::lock_guard<std::mutex> lk(mu_);
    device = Device();  // loaded already, unless this rank has had no device tensor (it joined)
    if (!device) return Status::Aborted("no device layer: " + device_error_);
  }
  if (device_id < 0) {  // the device of the set's communicator, else of any device tensor seen, else by local rank
    if (!ps.device_comms.empty()) {
      device_id = ps.device_comms.begin()->first;
    } else if (!stagings_.Devices().empty()) {
      device_id = stagings_.Devices().front();
    } else {
      int32_t count = 0;
      device->device_count(&count);
      device_id = count > 0 ? config_.local_rank % count : 0;
    }
  }
  if (host && !ps.hierarchy) return Status::Aborted("no hierarchy of hosts in process set " + std::to_string(ps.id));
  auto& comms = host ? ps.host_device_comms : ps.device_comms;
  std::unique_ptr<DeviceComm>& slot = comms[device_id];
  if (slot) {
    *out = slot.get();
    return Status::Ok();
  }
  Status st;
  DeviceStaging* staging = stagings_.For(device_id, &st);  // its stream carries the set's collectives
  if (!staging) return st;
  std::vector<int32_t> job_ranks = host ? ps.hierarchy->host_ranks() : ps.ranks;
  std::string prefix = config_.key_prefix + "/ps" + std::to_string(ps.id);
  if (host) prefix += "/host" + std::to_string(ps.hierarchy->host_index());
  prefix += "/device" + std::to_string(device_id);
  hvd_comm_config_v1 cc{};
  cc.struct_size = sizeof cc;
  cc.rank = host ? ps.hierarchy->local_index() : ps.my_rank;
  cc.size = (int32_t)job_ranks.size();
  cc.job_ranks = job_ranks.data();
  cc.key_prefix = prefix.c_str();
  cc.timeout_ms = config_.device_timeout_ms;
  cc.device_kind = HVD_DEVICE_CUDA;
  cc.device_id = device_id;
  cc.device = device;
  cc.stream = staging->stream();
  std::unique_ptr<Comm> comm;
  st = Comm::Create(device_backend_, cc, store_->c_store(), &comm);
  if (!st.ok()) {
    comms.erase(device_id);
    return st;
  }
  slot = std::make_unique<DeviceComm>(std::move(comm), device, device_id);
  *out = slot.get();
  return st;
}

Status Engine::WatchDeviceWork(const std::vector<ProcessSet*>& sets) {
  for (ProcessSet* ps : sets) {
    for (auto* comms : {&ps->device_comms, &ps->host_device_comms}) {
      for (auto& [id, dc] : *comms) {
        Status st = dc->Watch();
        if (!st.ok()) return st;
      }
    }
  }
  return Status::Ok();
}

void Engine::StopAfterDeviceFailure(const Status& failure) {
  // Peers raise it as it is (a device backend's message names its rank, as NCCL's does).
  PublishStopReason(store_.get(), config_.key_prefix, config_.rank, failure);
  std::lock_guard<std::mutex> lk(mu_);
  shutdown_requested_ = true;
  if (deferred_failure_.ok() || deferred_cause_ != StopCause::kTransport) {
    deferred_failure_ = failure;
    deferred_cause_ = StopCause::kTransport;
  }
}

Status Engine::ConnectHierarchy(ProcessSet& global) {
  const bool asked = config_.hierarchical_allreduce || config_.hierarchical_allgather;
  if (!(asked || config_.autotune) || global.size() < 2) return Status::Ok();
  std::string why;
  Status st = HierarchicalComm::Connect(
      *global.comm, config_.host_key, config_.local_rank,
      [this](const std::vector<int32_t>& ranks, int32_t my_index, const std::string& key, std::unique_ptr<Comm>* out) {
        return ConnectRanks(ranks, my_index, "hier/" + key, out);
      },
      &global.hierarchy, &why);
  if (st.ok() && global.hierarchy) {
    global.hierarchy->allreduce = config_.hierarchical_allreduce;
    global.hierarchy->allgather = config_.hierarchical_allgather;
  }
  if (st.ok() && !global.hierarchy && asked && config_.rank == 0) {
    HVD_LOG(log_, kWarning) << (config_.hierarchical_allreduce ? "HOROVOD_HIERARCHICAL_ALLREDUCE"
                                                               : "HOROVOD_HIERARCHICAL_ALLGATHER")
                            << " has no effect in this job: " << why;
  }
  return st;
}

// Settings that shape the negotiation protocol must be equal everywhere, or the bit-vectors of
// different ranks would silently mean different things.
Status Engine::CheckConfigAgreement() {
  ProcessSet& global = *sets_.at(0);
  int32_t n = global.size();
  // Static process sets must list the same ranks everywhere: compared through a hash.
  uint64_t sets_hash = 1469598103934665603ull;
  for (const auto& set : config_.process_sets) {
    std::vector<int32_t> sorted = set;
    std::sort(sorted.begin(), sorted.end());
    for (int32_t r : sorted) sets_hash = (sets_hash ^ (uint64_t)(uint32_t)r) * 1099511628211ull;
    sets_hash = (sets_hash ^ 0xFFFFFFFFull) * 1099511628211ull;
  }
  constexpr int kCount = 10;
  const int64_t device_ops = device_backend_ ? (int64_t)config_.device_ops : 0;
  int64_t mine[kCount] = {config_.cache_capacity,
                          config_.inline_bytes,
                          config_.dynamic_process_sets ? 1 : 0,
                          (int64_t)(sets_hash >> 1),
                          config_.fusion_threshold,
                          config_.hierarchical_allreduce ? 1 : 0,
                          config_.inline_max_bytes,
                          config_.eager_bytes,
                          device_ops,
                          config_.hierarchical_allgather ? 1 : 0};
  std::vector<int64_t> all(kCount * (size_t)n);
  Status st = global.comm->Allgatherv(mine, all.data(), std::vector<size_t>(n, kCount), HVD_DTYPE_INT64);
  if (!st.ok()) return st;
  // Each of these shapes the collective calls every rank makes: ranks that differ would diverge.
  const char* names[kCount] = {"HOROVOD_CACHE_CAPACITY",
                               "HOROVOD_NEGOTIATION_INLINE_BYTES",
                               "HOROVOD_DYNAMIC_PROCESS_SETS",
                               "the static process sets (a hash of their ranks)",
                               "HOROVOD_FUSION_THRESHOLD",
                               "HOROVOD_HIERARCHICAL_ALLREDUCE",
                               "HOROVOD_NEGOTIATION_INLINE_MAX_BYTES",
                               "HOROVOD_NEGOTIATION_EAGER_BYTES",
                               "the collectives on GPU tensors that the GPU backend takes (HOROVOD_GPU_OPERATIONS, "
                               "as a bit per op; 0: none, or no GPU backend installed)",
                               "HOROVOD_HIERARCHICAL_ALLGATHER"};
  for (int k = 0; k < kCount; ++k) {
    for (int32_t r = 0; r < n; ++r) {
      if (all[kCount * r + k] != all[k]) {
        return Status::InvalidArgument(std::string(names[k]) + " differs between ranks: rank 0 has " +
                                       std::to_string(all[k]) + ", rank " + std::to_string(r) + " has " +
                                       std::to_string(all[kCount * r + k]) + "; every rank must use the same setting");
      }
    }
  }
  return Status::Ok();
}

void Engine::Start() {
  std::lock_guard<std::mutex> lk(mu_);
  if (started_) throw StatusError{Status::InvalidArgument("this engine was already started")};
  started_ = true;
  if (config_.size < 1 || config_.rank < 0 || config_.rank >= config_.size) {
    throw StatusError{Status::InvalidArgument("rank " + std::to_string(config_.rank) + " is out of range for size " +
                                              std::to_string(config_.size))};
  }
  std::vector<int32_t> everyone(config_.size);
  for (int32_t r = 0; r < config_.size; ++r) everyone[r] = r;
  sets_[0] = std::make_unique<ProcessSet>(0, everyone, config_.rank, config_.cache_capacity, stall_settings_);
  std::set<std::vector<int32_t>> seen = {everyone};
  for (const auto& given : config_.process_sets) {
    std::vector<int32_t> ranks = given;
    std::sort(ranks.begin(), ranks.end());
    if (ranks.empty() || std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end() || ranks.front() < 0 ||
        ranks.back() >= config_.size) {
      throw StatusError{Status::InvalidArgument("process set " + RanksString(given) +
                                                " must list distinct ranks in [0, " + std::to_string(config_.size) +
                                                ")")};
    }
    if (!seen.insert(ranks).second) {
      throw StatusError{Status::InvalidArgument("process set " + RanksString(ranks) + " is given twice")};
    }
    int32_t id = next_set_id_++;
    sets_[id] = std::make_unique<ProcessSet>(id, ranks, config_.rank, config_.cache_capacity, stall_settings_);
  }
  for (auto& kv : sets_) {
    Status st = Connect(*kv.second);
    if (st.ok() && kv.first == 0) st = CheckConfigAgreement();
    if (st.ok() && kv.first == 0) st = ConnectHierarchy(*kv.second);
    if (!st.ok()) {
      sets_.clear();
      throw StatusError{st};
    }
  }
  if (config_.timeline_steps_from == 0 && config_.timeline_steps_to != 0) StartConfiguredTimeline();
  running_ = true;
  thread_ = std::thread([this] { Loop(); });
  NameAndPin(thread_);
}

void Engine::NameAndPin(std::thread& t) {
  pthread_setname_np(t.native_handle(), "hvd-engine");  // as ps and top show it
  if (config_.thread_affinity < 0) return;
  cpu_set_t cores;
  CPU_ZERO(&cores);
  CPU_SET(config_.thread_affinity, &cores);
  if (int rc = pthread_setaffinity_np(t.native_handle(), sizeof cores, &cores)) {
    HVD_LOG(log_, kWarning) << "HOROVOD_THREAD_AFFINITY: could not pin the engine's thread to core "
                            << config_.thread_affinity << ": " << std::strerror(rc);
  }
}

void Engine::Shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    shutdown_requested_ = true;
  }
  cv_.notify_all();
  std::thread loop;
  {
    std::lock_guard<std::mutex> lk(mu_);
    loop.swap(thread_);  // only one caller joins, even if two shut down at once
  }
  if (loop.joinable()) loop.join();
  std::lock_guard<std::mutex> lk(mu_);
  sets_.clear();  // destroys the communicators
  stagings_.Clear();  // the loop has stopped: nothing stages any more
  timeline_->Stop();
  output_pool_->Close();  // outputs still held by callers are unmapped when they free them
}

bool Engine::running() {
  std::lock_guard<std::mutex> lk(mu_);
  return running_;
}

ProcessSet* Engine::FindSet(int32_t id) {
  auto it = sets_.find(id);
  if (it == sets_.end() || std::find(sets_to_remove_.begin(), sets_to_remove_.end(), id) != sets_to_remove_.end())
    return nullptr;
  return it->second.get();
}

const hvd_device_v1* Engine::Device() {
  if (!device_loaded_) {
    device_loaded_ = true;
    device_ = DeviceNamed(config_.device, &device_error_);
    if (device_) {
      events_ = EventPool::Create(device_);
      stagings_.set_device(device_, events_);
    }
  }
  return device_;
}

Status Engine::MarkReady(TensorEntry& e) {
  Status st;
  e.ready_event = events_->Take(e.input.device_id, &st);
  if (!e.ready_event) return st.WithMessage("tensor '" + e.name + "': " + st.message());
  e.input.ready_event = e.ready_event.get();
  return DeviceStatus(device_, device_->event_record(e.input.ready_event, e.stream),
                      "recording tensor '" + e.name + "' ready");
}

std::shared_ptr<HandleState> Engine::Enqueue(std::unique_ptr<TensorEntry> e, HandleState::OnComplete on_complete) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!running_) {
    throw StatusError{Status::Aborted(stop_status_.ok() ? "Horovod is not running: call hvd.init() first"
                                                        : "Horovod has stopped: " + stop_status_.message())};
  }
  ProcessSet* ps = FindSet(e->process_set_id);
  if (!ps) {
    throw StatusError{Status::InvalidArgument(std::string(OpTypeName(e->type)) + " of tensor '" + e->name +
                                              "': process set " + std::to_string(e->process_set_id) +
                                              " does not exist (or has been removed)")};
  }
  if (!ps->member()) {
    throw StatusError{Status::InvalidArgument(std::string(OpTypeName(e->type)) + " of tensor '" + e->name + "': rank " +
                                              std::to_string(config_.rank) + " is not a member of process set " +
                                              std::to_string(ps->id) + " (ranks " + RanksString(ps->ranks) + ")")};
  }
  if (e->type == OpType::kBroadcast && ps->id != 0) {
    // Horovod's root_rank is a global rank, also on a process set; the set's communicator wants
    // its position there. (The global set's positions are the ranks: checked by ValidateEntry.)
    auto member = std::find(ps->ranks.begin(), ps->ranks.end(), e->root);
    if (member == ps->ranks.end()) {
      throw StatusError{Status::InvalidArgument("broadcast of tensor '" + e->name + "': root rank " +
                                                std::to_string(e->root) + " is not a member of process set " +
                                                std::to_string(ps->id) + " (ranks " + RanksString(ps->ranks) + ")")};
    }
    e->root = (int32_t)(member - ps->ranks.begin());
  }
  Status st;
  uint32_t device_kinds = backend_->api()->device_kinds;
  if (e->input.device_kind != HVD_DEVICE_CPU && !(device_kinds & e->input.device_kind)) {
    // A backend for host memory: the engine stages device tensors through it, given a device.
    if (Device()) {
      device_kinds |= device_->device_kind;
    } else {
      st = Status::InvalidArgument(std::string(OpTypeName(e->type)) + " of tensor '" + e->name +
                                   "': the tensor is on a CUDA device, but no CUDA device can be used (" +
                                   device_error_ +
                                   "); with one, hvd stages CUDA tensors through the CPU backend, "
                                   "and hvd-backend-nccl runs them on the GPU");
    }
  }
  if (st.ok()) st = ValidateEntry(*e, ps->size(), device_kinds);
  if (st.ok() && e->input.device_kind != HVD_DEVICE_CPU && e->input.num_elements() > 0) st = MarkReady(*e);
  if (!st.ok()) {
    // Refused alone, a group member would leave its partners waiting for it on every rank.
    const bool group = e->group_id >= 0;
    if (group) QueueRefusal(lk, *ps, e->type, e->name, e->group_id, e->group_size, st.message());
    throw StatusError{st, group};
  }
  if (!ps->in_flight.insert(e->name).second) {
    throw StatusError{Status::InvalidArgument(std::string(OpTypeName(e->type)) + " of tensor '" + e->name +
                                              "': an operation with this name is already in "
                                              "progress on process set " +
                                              std::to_string(ps->id) +
                                              "; names of operations in flight must be unique")};
  }
  if (IsProcessSetChange(e->type)) ++set_changes_in_flight_;
  auto handle = std::make_shared<HandleState>(bell_, std::move(on_complete));
  handle->caller_stream = e->stream;
  if (timeline_->active()) {  // the framework's synchronize, on the tensor's row
    handle->ObserveWaits(
        [timeline = std::weak_ptr<Timeline>(timeline_), name = e->name](int64_t began_us, int64_t ended_us) {
          if (auto t = timeline.lock()) t->Waited(name, began_us, ended_us);
        });
  }
  e->handle = handle;
  e->enqueued_us = NowMicros();
  const bool wake = Push(std::move(e));
  lk.unlock();
  if (wake) cv_.notify_one();  // a busy loop drains the queue at its next cycle anyway
  handle->CountAsWaiting();    // an operation awaited by a callback: its caller waits now
  return handle;
}

void Engine::QueueRefusal(std::unique_lock<std::mutex>& lk, ProcessSet& ps, OpType type, const std::string& name,
                          int64_t group_id, int32_t group_size, const std::string& why) {
  // A name the wire cannot carry was refused for that; nobody else can have negotiated it either.
  if (group_id < 0 || group_size < 1 || name.empty() || name.size() > kMaxNameBytes) return;
  if (!ps.in_flight.insert(name).second) return;
  auto e = std::make_unique<TensorEntry>();
  e->name = name;
  e->type = type;
  e->process_set_id = ps.id;
  e->group_id = group_id;
  e->group_size = group_size;
  e->refusal = why.substr(0, 4096);  // a reason, not a payload
  e->handle = std::make_shared<HandleState>(bell_);  // its caller has its error already: nobody waits
  e->enqueued_us = NowMicros();
  const bool wake = Push(std::move(e));
  lk.unlock();
  if (wake) cv_.notify_one();
}

void Engine::Refuse(OpType type, const std::string& name, int32_t process_set_id, int64_t group_id, int32_t group_size,
                    const std::string& why) {
  std::unique_lock<std::mutex> lk(mu_);
  ProcessSet* ps = running_ ? FindSet(process_set_id) : nullptr;
  if (ps && ps->member() && !name.empty()) QueueRefusal(lk, *ps, type, name, group_id, group_size, why);
}

bool Engine::Push(std::unique_ptr<TensorEntry> e) {
  // Only the first of a burst wakes the loop, which then waits for the rest (AwaitWork), and only
  // if the loop would otherwise sleep past the burst's cycle: waking a thread costs the caller tens
  // of microseconds on a virtual machine, for each gradient of a backward pass. A caller that
  // blocks rings the bell, which wakes the loop whatever its deadline.
  bool wake = false;
  if (queue_.empty()) {
    first_enqueue_ = std::chrono::steady_clock::now();
    rings_at_first_enqueue_ = bell_->rings();
    wake = loop_waiting_ && loop_wakes_at_ > first_enqueue_ + cycle_.load();
  }
  queue_.push_back(std::move(e));
  return wake;
}

std::shared_ptr<HandleState> Engine::AddProcessSet(std::vector<int32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!config_.dynamic_process_sets) {
      throw StatusError{Status::InvalidArgument(
          "adding process sets after init() requires dynamic process sets: set HOROVOD_DYNAMIC_PROCESS_SETS=1")};
    }
    if (ranks.empty() || std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end() || ranks.front() < 0 ||
        ranks.back() >= config_.size) {
      throw StatusError{Status::InvalidArgument("process set " + RanksString(ranks) +
                                                " must list distinct ranks in [0, " + std::to_string(config_.size) +
                                                ")")};
    }
    for (auto& kv : sets_)
      if (kv.second->ranks == ranks && !std::count(sets_to_remove_.begin(), sets_to_remove_.end(), kv.first))
        throw StatusError{Status::InvalidArgument("a process set with ranks " + RanksString(ranks) +
                                                  " already exists (id " + std::to_string(kv.first) + ")")};
  }
  auto e = std::make_unique<TensorEntry>();
  e->type = OpType::kAddProcessSet;
  e->name = NextProcessSetChangeName();
  e->ranks = ranks;
  return Enqueue(std::move(e));
}

std::shared_ptr<HandleState> Engine::RemoveProcessSet(int32_t id) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!config_.dynamic_process_sets) {
      throw StatusError{Status::InvalidArgument(
          "removing process sets requires dynamic process sets: set HOROVOD_DYNAMIC_PROCESS_SETS=1")};
    }
    if (id == 0) throw StatusError{Status::InvalidArgument("the global process set (id 0) cannot be removed")};
    if (!FindSet(id))
      throw StatusError{Status::InvalidArgument("process set " + std::to_string(id) + " does not exist")};
  }
  auto e = std::make_unique<TensorEntry>();
  e->type = OpType::kRemoveProcessSet;
  e->name = NextProcessSetChangeName();
  e->ranks = {id};
  return Enqueue(std::move(e));
}

std::string Engine::NextProcessSetChangeName() {
  std::lock_guard<std::mutex> lk(mu_);
  return "__hvd.process_set_change." + std::to_string(process_set_requests_++);
}

std::vector<ProcessSetInfo> Engine::ProcessSets() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<ProcessSetInfo> out;
  for (auto& kv : sets_)
    if (FindSet(kv.first)) out.push_back({kv.first, kv.second->ranks});
  return out;
}

int32_t Engine::ProcessSetSize(int32_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  ProcessSet* ps = FindSet(id);
  return ps ? ps->size() : -1;
}

int32_t Engine::ProcessSetRank(int32_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  ProcessSet* ps = FindSet(id);
  return ps ? ps->my_rank : -1;
}

std::string Engine::TimelinePath(const std::string& path) const {
  return config_.timeline_all_ranks ? path + ".rank" + std::to_string(config_.rank) : path;
}

Status Engine::OpenTimeline(const std::string& path, bool mark_cycles) {
  if (config_.rank != 0 && !config_.timeline_all_ranks) return Status::Ok();  // rank 0 writes the job's timeline
  return timeline_->Start(TimelinePath(path), mark_cycles, config_.timeline_max_bytes, config_.rank);
}

void Engine::StartTimeline(const std::string& path, bool mark_cycles) {
  Status st = OpenTimeline(path, mark_cycles);
  if (!st.ok()) throw StatusError{st};
}

void Engine::StopTimeline() { timeline_->Stop(); }

void Engine::StartConfiguredTimeline() {
  if (config_.timeline_path.empty()) return;
  Status st = OpenTimeline(config_.timeline_path, config_.timeline_mark_cycles);
  if (!st.ok()) HVD_LOG(log_, kWarning) << st.message();
}

void Engine::FollowTimelineWindow(uint64_t steps) {
  if ((int64_t)steps == config_.timeline_steps_from) StartConfiguredTimeline();
  if ((int64_t)steps == config_.timeline_steps_to) timeline_->Stop();
}

void Engine::Complete(ProcessSet& ps, std::unique_ptr<TensorEntry> e, Status status) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ps.in_flight.erase(e->name);
    if (IsProcessSetChange(e->type)) --set_changes_in_flight_;
  }
  e->handle->Complete(std::move(status));
}

// When no rank has anything pending, cycles slow down (doubling, up to this many cycle times) so
// an idle job does not keep cores busy; any work, on any rank, brings them back to full speed.
constexpr int64_t kMaxIdleCycleMultiple = 16;

void Engine::AwaitWork(std::unique_lock<std::mutex>& lk, std::chrono::microseconds wait, uint64_t seen) {
  const auto idle_deadline = std::chrono::steady_clock::now() + wait;
  loop_waiting_ = true;
  bool watched = false;
  while (!shutdown_requested_ && !stopped_.load() && iterations_.load() == seen) {
    const auto now = std::chrono::steady_clock::now();
    if (queue_.empty()) {
      if (now >= idle_deadline) break;
      loop_wakes_at_ = idle_deadline;
      cv_.wait_until(lk, idle_deadline);
      continue;  // a first operation may have arrived just as the wait timed out
    }
    // Submitted work waits for a caller to block, or for one cycle time at most: also when quick
    // cycles were due (a caller blocked on earlier work), which would take the burst in parts.
    const auto work_deadline = first_enqueue_ + cycle_.load();
    if (bell_->rings() != rings_at_first_enqueue_ || now >= work_deadline) break;
    if (!watched) {
      // A caller that submits one operation and waits for it blocks microseconds later: watching
      // for that, awake, saves a second wake-up of this thread, which costs tens of microseconds
      // (more on a virtual machine). A burst keeps submitting past it, and the loop then sleeps.
      watched = true;
      const uint64_t rings = rings_at_first_enqueue_;  // a helping caller may drain the queue, and
      lk.unlock();                                      // the next submission set it anew
      const auto until = std::min(work_deadline, now + kWatchForCaller);
      // Yielding, not spinning: the caller may need this very core to get there. A caller that
      // runs the cycle itself (HelpWithCycle) ends the watch too.
      while (bell_->rings() == rings && !helping_.load() && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      lk.lock();
      continue;
    }
    cv_.wait_until(lk, work_deadline);
  }
  loop_waiting_ = false;
}

void Engine::Loop() {
  while (!stopped_.load()) {
    const uint64_t seen = iterations_.load();
    std::chrono::microseconds wait;
    {
      // From the end of the last iteration, whichever thread ran it.
      std::lock_guard<std::mutex> cycle(cycle_mu_);
      const auto since =
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - last_iteration_end_);
      wait = std::max(idle_wait_ - since, std::chrono::microseconds(0));
    }
    {
      std::unique_lock<std::mutex> lk(mu_);
      AwaitWork(lk, wait, seen);
    }
    std::lock_guard<std::mutex> cycle(cycle_mu_);
    // A caller ran an iteration meanwhile (HelpWithCycle): the next one is paced from there.
    if (stopped_.load() || iterations_.load() != seen) continue;
    RunIteration();
  }
  Status failure;
  StopCause cause;
  {
    std::lock_guard<std::mutex> cycle(cycle_mu_);
    failure = failure_;
    cause = cause_;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    // A device failure is the cause of whatever the negotiation saw after it.
    if (!deferred_failure_.ok() && (failure.ok() || deferred_cause_ == StopCause::kTransport)) {
      failure = deferred_failure_;
      cause = deferred_cause_;
    }
  }
  FailEverything(failure.ok() ? Status::Aborted("Horovod has been shut down") : failure, cause);
}

bool Engine::RunIteration() {
  cycle_owner_ = std::this_thread::get_id();  // its completion callbacks must not help (HelpWithCycle)
  std::vector<ProcessSet*> active;
  StopWish wish;
  TunedSettings outgoing;  // rank 0's proposal, for its record of the global set
  {
    std::unique_lock<std::mutex> lk(mu_);
    while (!queue_.empty()) {
      std::unique_ptr<TensorEntry> e = std::move(queue_.front());
      queue_.pop_front();
      ProcessSet* ps = FindSet(e->process_set_id);
      if (!ps) {  // removed between enqueue and now
        lk.unlock();
        e->handle->Complete(
            Status::InvalidArgument("process set " + std::to_string(e->process_set_id) + " was removed"));
        lk.lock();
        continue;
      }
      if (timeline_->active()) {
        std::string activity = std::string("NEGOTIATE_") + OpTypeName(e->type);
        for (char& c : activity) c = (char)toupper(c);
        timeline_->Begin(e->name, activity, e->enqueued_us);
      }
      if (e->type == OpType::kJoin) ps->joined = true;
      e->pending_since_us = NowMicros();
      ps->arrival.push_back(e->name);
      ps->pending[e->name] = std::move(e);
    }
    wish = !shutdown_requested_ ? StopWish::kNone : deferred_failure_.ok() ? StopWish::kStop : StopWish::kStopFailed;
    for (auto& kv : sets_)
      if (kv.second->member()) active.push_back(kv.second.get());
    outgoing = proposed_;
    proposed_.epoch = 0;
  }
  timeline_->MarkCycle();
  bool anyone_busy = false;
  bool stop = false;
  Status failure;
  arrived_ = TunedSettings();
  for (ProcessSet* ps : active) {
    failure = RunSet(*ps, wish, &stop, &anyone_busy, &cause_, ps->id == 0 ? outgoing : TunedSettings());
    if (stop || !failure.ok()) {
      stop = true;
      break;
    }
  }
  if (!stop && arrived_.epoch) ApplySettings(arrived_);
  if (!stop && device_backend_) {  // work queued on the device backend that failed since
    Status device_failure = WatchDeviceWork(active);
    if (!device_failure.ok()) StopAfterDeviceFailure(device_failure);
  }
  if (!anyone_busy) {
    const auto cycle = cycle_.load();
    idle_wait_ = std::min(std::max(idle_wait_, cycle) * 2, cycle * kMaxIdleCycleMultiple);
  } else {  // quicker cycles only while a caller waits: otherwise they would take its core
    idle_wait_ = bell_->blocked() > 0 ? pacer_.BusyWait() : cycle_.load();
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (int32_t id : sets_to_remove_) sets_.erase(id);
    sets_to_remove_.clear();
  }
  if (stop) {
    failure_ = failure;
    stopped_ = true;
  }
  last_iteration_end_ = std::chrono::steady_clock::now();
  ++iterations_;
  cycle_owner_ = std::thread::id();
  return anyone_busy;
}

bool Engine::HelpWithCycle() {
  // Not from the thread already running an iteration (an operation's completion callback).
  if (cycle_owner_.load() == std::this_thread::get_id()) return false;
  std::unique_lock<std::mutex> cycle(cycle_mu_, std::try_to_lock);
  if (!cycle.owns_lock() || stopped_.load()) return false;
  // Only where the global set's records travel as eager messages (Gloo over TCP, the in-memory
  // backend): there a cycle's waits are bounded by the backend's timeout, and the hand-offs it
  // spares are a large part of an op's cost. Elsewhere a peer that hangs mid-cycle (MPI has no
  // timeout) would hold this caller out of reach of its signals.
  auto global = sets_.find(0);
  if (global == sets_.end() || global->second->records.capacity() == 0) return false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    // Nothing queued: this caller's work is already being negotiated, and the loop paces that.
    // Shutting down: the loop's own iteration carries it.
    // A process-set change connects the set's members through the store, which may call Python
    // (the launcher's store): not on a caller's thread, where Python would run its signal handlers.
    if (queue_.empty() || shutdown_requested_ || set_changes_in_flight_ > 0) return false;
  }
  helping_ = true;
  bell_->CallerHelps();
  const bool anyone_busy = RunIteration();
  ++negotiation_stats_.helped_cycles;
  bell_->CallerResumes();
  helping_ = false;
  // The loop waits on the pace it saw before; work left, a stop, or a shutdown decided in this
  // cycle (a stall in a process set) needs it sooner.
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (anyone_busy || stopped_.load() || shutdown_requested_) cv_.notify_one();
  }
  return true;
}

Status Engine::RunSet(ProcessSet& ps, StopWish wish, bool* stop, bool* anyone_busy, StopCause* cause,
                      const TunedSettings& outgoing) {
  CycleResult result;
  // Only the global set carries the shutdown flag: every rank sees it in the same cycle. It also
  // carries whether this rank has work anywhere, so that peers in other sets keep cycling.
  bool work_elsewhere = false;
  if (ps.id == 0) {
    std::lock_guard<std::mutex> lk(mu_);
    work_elsewhere = !queue_.empty();
    for (auto& kv : sets_) work_elsewhere = work_elsewhere || (kv.second.get() != &ps && !kv.second->pending.empty());
  }
  auto negotiation_start = std::chrono::steady_clock::now();
  Status st = controller_.RunCycle(ps, ps.id == 0 ? wish : StopWish::kNone, work_elsewhere, &result,
                                   &negotiation_stats_, outgoing);
  if (ps.id == 0) {
    ++global_cycles_;
    if (st.ok() && result.settings.epoch) arrived_ = result.settings;
    pacer_.Record(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - negotiation_start));
  }
  if (!st.ok()) {
    *cause = StopCause::kTransport;
    return st;
  }
  *anyone_busy = *anyone_busy || result.anyone_busy;
  if (result.shutdown) {
    if (ps.id != 0) {
      // A stall shutdown decided in a process set: the global set carries it to every rank in the
      // next cycle (instead of the other ranks timing out), and the store carries its message to
      // the ranks outside the set; this rank then fails with the stall.
      Status stall = Status::Aborted(result.shutdown_error);
      PublishStopReason(store_.get(), config_.key_prefix, config_.rank, stall);
      std::lock_guard<std::mutex> lk(mu_);
      shutdown_requested_ = true;
      if (deferred_failure_.ok()) {
        deferred_failure_ = stall;
        deferred_cause_ = StopCause::kStall;
      }
      return Status::Ok();
    }
    *stop = true;
    if (!result.shutdown_error.empty()) {
      *cause = StopCause::kStall;
      return Status::Aborted(result.shutdown_error);
    }
    if (wish != StopWish::kNone) return Status::Ok();  // this rank asked too: a normal end, or its own failure
    if (!result.failed_by.empty()) {  // peers stop because they failed: raise what they raise
      *cause = StopCause::kStall;
      return PeerFailure(store_.get(), config_.key_prefix, result.failed_by, config_.failure_report_wait_ms);
    }
    *cause = StopCause::kPeerShutdown;
    return Status::Aborted(PeerShutdownMessage(result.shutdown_by));
  }
  st = ExecuteCycle(ps, result);
  ps.ForgetCompleted();  // once per cycle, after everything this cycle completed
  if (!st.ok() && executor_.TakeDeviceFailure()) {  // negotiation still works: it carries the stop
    StopAfterDeviceFailure(st);
    return Status::Ok();
  }
  if (!st.ok()) *cause = StopCause::kTransport;
  return st;
}

void Engine::ApplySettings(const TunedSettings& settings) {
  executor_.SetFusionThreshold(std::max<int64_t>(0, settings.fusion_threshold));
  const std::chrono::microseconds cycle(std::max<uint32_t>(1, settings.cycle_time_us));
  cycle_ = cycle;
  pacer_.SetCycle(cycle);
  ProcessSet& global = *sets_.at(0);
  if (global.hierarchy) {  // made where the job spans hosts (ConnectHierarchy): else nothing to switch
    global.hierarchy->allreduce = settings.hierarchical_allreduce;
    global.hierarchy->allgather = settings.hierarchical_allgather;
  }
  std::lock_guard<std::mutex> lk(settings_mu_);
  applied_ = {settings, global_cycles_};
}

uint32_t Engine::ProposeSettings(TunedSettings settings) {
  if (config_.rank != 0) {
    throw StatusError{
        Status::InvalidArgument("tuned settings are proposed on rank 0, which sends them to every rank; this is rank " +
                                std::to_string(config_.rank))};
  }
  if (settings.fusion_threshold < 0) throw StatusError{Status::InvalidArgument("a negative fusion threshold")};
  std::lock_guard<std::mutex> lk(mu_);
  settings.epoch = ++last_epoch_;
  proposed_ = settings;
  return settings.epoch;
}

AppliedSettings Engine::CurrentSettings() {
  std::lock_guard<std::mutex> lk(settings_mu_);
  return applied_;
}

Status Engine::ExecuteCycle(ProcessSet& ps, CycleResult& result) {
  executor_.ExecuteInline(ps, result.inline_completions);
  Status st;
  // Process-set changes run on the engine; everything else, in runs, on the executor.
  std::vector<Response> run;
  run.reserve(result.responses.size());
  for (Response& r : result.responses) {
    if (r.kind != Response::Kind::kOp || !IsProcessSetChange(r.type)) {
      run.push_back(std::move(r));
      continue;
    }
    st = executor_.Execute(ps, std::move(run));
    run.clear();
    if (!st.ok()) return st;
    st = ApplyProcessSetChange(r);
    if (!st.ok()) return st;
  }
  return executor_.Execute(ps, std::move(run));
}

Status Engine::ApplyProcessSetChange(const Response& r) {
  ProcessSet& global = *sets_.at(0);
  auto it = global.pending.find(r.names[0]);
  if (it == global.pending.end()) {  // the coordinator only orders changes every rank submitted
    return Status::Aborted("process set change '" + r.names[0] + "' arrived at a rank that did not request it");
  }
  std::unique_ptr<TensorEntry> e = std::move(it->second);
  global.pending.erase(it);
  if (r.type == OpType::kAddProcessSet) {
    int32_t id;
    {
      std::lock_guard<std::mutex> lk(mu_);
      id = next_set_id_++;
    }
    auto ps = std::make_unique<ProcessSet>(id, r.ranks, config_.rank, config_.cache_capacity, stall_settings_);
    Status st = Connect(*ps);  // collective among the members, who all execute this response now
    if (!st.ok()) {
      Complete(global, std::move(e), st);
      return st;
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      sets_[id] = std::move(ps);
    }
    e->handle->value = id;
    Complete(global, std::move(e), Status::Ok());
    return Status::Ok();
  }
  int32_t id = r.ranks.empty() ? -1 : r.ranks[0];
  ProcessSet* target;
  {
    std::lock_guard<std::mutex> lk(mu_);
    target = FindSet(id);
    if (target) sets_to_remove_.push_back(id);
  }
  if (target) {
    for (auto& kv : target->pending)
      Complete(*target, std::move(kv.second),
               Status::InvalidArgument("process set " + std::to_string(id) + " was removed"));
    target->pending.clear();
    target->arrival.clear();
  }
  e->handle->value = id;
  Complete(global, std::move(e), Status::Ok());
  return Status::Ok();
}

void Engine::FailEverything(const Status& failure, StopCause cause) {
  // First explain the failure (which may wait for the launcher's report), then stop accepting
  // work: an operation submitted meanwhile is failed below with the same, explained error.
  FailureContext context;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& kv : sets_)
      for (const std::string& name : kv.second->arrival)
        if (kv.second->pending.count(name)) context.pending.push_back(name);
    for (auto& e : queue_) context.pending.push_back(e->name);
  }
  // Peers caused it and this rank was waiting on them: the launcher may know why.
  if ((cause == StopCause::kTransport || cause == StopCause::kPeerShutdown) && !context.pending.empty()) {
    context.store = store_.get();
    context.report_key = config_.failure_report_key;
    context.report_wait_ms = config_.failure_report_wait_ms;
  }
  const Status status = ExplainFailure(failure, context);
  // A peer's shutdown while nothing was pending here is how a job normally ends: no error.
  if (cause == StopCause::kPeerShutdown && context.pending.empty()) {
    HVD_LOG(log_, kDebug) << status.message();
  } else if (cause != StopCause::kThisRank) {
    HVD_LOG(log_, kError) << status.message();
  }
  std::vector<std::pair<ProcessSet*, std::unique_ptr<TensorEntry>>> doomed;
  {
    std::lock_guard<std::mutex> lk(mu_);
    running_ = false;
    stop_status_ = status;
    for (auto& kv : sets_) {
      for (auto& p : kv.second->pending) doomed.emplace_back(kv.second.get(), std::move(p.second));
      kv.second->pending.clear();
      kv.second->arrival.clear();
    }
    while (!queue_.empty()) {
      ProcessSet* ps = FindSet(queue_.front()->process_set_id);
      doomed.emplace_back(ps, std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  for (auto& d : doomed) {
    if (d.first) {
      Complete(*d.first, std::move(d.second), status);
    } else {
      d.second->handle->Complete(status);
    }
  }
}

}  // namespace hvdcore
