// What a rank is told when the job fails under it.
//
// A collective cut off by a lost peer only knows what its transport saw ("connection reset while
// waiting on rank 2"). The error a user reads should also say what this rank was waiting for and,
// when a launcher watches the job, what happened to the rank that was lost ("rank 1 was killed by
// signal SIGKILL"). The launcher writes that description into the job's store under
// `<job key>/lost` (the contract with launchers, see horovod.runner.worker_env); the engine reads it,
// waiting a little because the transport usually notices a dead peer before the launcher does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/kv_store.h"
#include "core/common.h"

namespace hvdcore {

// Why peers stopped this engine through negotiation: the job ranks that asked for a shutdown.
std::string PeerShutdownMessage(const std::vector<int32_t>& ranks);

// A rank that stops because it failed (a stall shutdown decided in a process set that not every
// rank belongs to) first stores its error here, so that every rank can raise the same error.
std::string StopReasonKey(const std::string& key_prefix, int32_t rank);
void PublishStopReason(KVStore* store, const std::string& key_prefix, int32_t rank, const Status& reason);
// The error of the first of `failed_ranks`, read from the store (or a description without it).
Status PeerFailure(KVStore* store, const std::string& key_prefix, const std::vector<int32_t>& failed_ranks,
                   int64_t timeout_ms);

struct FailureContext {
  std::vector<std::string> pending;  // names of the operations this rank was waiting for
  KVStore* store = nullptr;          // the job's store, or null
  std::string report_key;            // empty: no launcher writes reports
  int64_t report_wait_ms = 0;        // how long to wait for the launcher's report
};

// `failure` with what this rank was waiting for and the launcher's report (if it has one) appended.
Status ExplainFailure(const Status& failure, const FailureContext& context);

}  // namespace hvdcore
