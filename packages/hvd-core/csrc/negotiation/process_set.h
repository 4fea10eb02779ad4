// A process set: a subset of the job's ranks with its own communicator, coordinator and cache.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend_loader.h"
#include "backend/device_comm.h"
#include "backend/hierarchical_comm.h"
#include "core/handle.h"
#include "diagnostics/job_stats.h"
#include "diagnostics/stall_inspector.h"
#include "negotiation/coordinator.h"
#include "negotiation/eager.h"
#include "negotiation/inline_space.h"
#include "negotiation/response_cache.h"

namespace hvdcore {

struct ProcessSet {
  ProcessSet(int32_t id_, std::vector<int32_t> ranks_, int32_t my_engine_rank, int32_t cache_capacity,
             const StallInspector& stall_settings)
      : id(id_),
        ranks(std::move(ranks_)),
        cache(cache_capacity),
        coordinator((int32_t)ranks.size()),
        stall(stall_settings) {
    for (size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i] == my_engine_rank) my_rank = (int32_t)i;
  }
  bool member() const { return my_rank >= 0; }
  // Drops completed names from `arrival`, keeping the order of what is still pending.
  void ForgetCompleted() {
    std::vector<std::string> still;
    for (const std::string& name : arrival)
      if (pending.count(name)) still.push_back(name);
    arrival.swap(still);
  }
  int32_t size() const { return (int32_t)ranks.size(); }

  const int32_t id;
  const std::vector<int32_t> ranks;  // engine ranks of the members, ascending
  int32_t my_rank = -1;              // this engine's rank within the set, -1 if not a member
  std::unique_ptr<Comm> comm;
  // The global set's allreduces go through it when HOROVOD_HIERARCHICAL_ALLREDUCE is on and the
  // job spans hosts with several ranks on some (hierarchical_comm.h); null otherwise.
  std::unique_ptr<HierarchicalComm> hierarchy;
  // The device backend's communicators (NCCL), by device id, made at the set's first collective
  // on that device (Engine::ConnectDevice).
  std::map<int32_t, std::unique_ptr<DeviceComm>> device_comms;
  // ... and those of this host's members, by device id, for hierarchical allreduces.
  std::map<int32_t, std::unique_ptr<DeviceComm>> host_device_comms;
  ResponseCache cache;
  Coordinator coordinator;  // used on the set's rank 0 only
  StallInspector stall;     // likewise
  Arrivals arrivals;        // likewise: the members' arrivals at cached collectives (job_stats.h)
  InlineSpace inline_space;  // the room for data in this set's negotiation records
  EagerChannel eager;        // data sent ahead of negotiation, on `comm` (eager.h)
  EagerChannel records;      // the negotiation records, on `comm`, where eager messages are open

  // Background thread only: entries drained from the queue, by name, and their arrival order
  // (which `arrival` keeps: the map's own order is never used).
  std::unordered_map<std::string, std::unique_ptr<TensorEntry>> pending;
  std::vector<std::string> arrival;
  bool joined = false;
  std::vector<uint8_t> fusion_buffer;

  // Guarded by the engine's queue mutex: names submitted and not yet completed (duplicate check).
  std::unordered_set<std::string> in_flight;
};

}  // namespace hvdcore
