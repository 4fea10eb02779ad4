#include "failure_report.h"

#include <sstream>

namespace hvdcore {

namespace {

constexpr size_t kNamesShown = 3;

std::string JoinRanks(const std::vector<int32_t>& ranks) {
  std::ostringstream out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) out << (i + 1 == ranks.size() ? " and " : ", ");
    out << ranks[i];
  }
  return out.str();
}

std::string DescribePending(const std::vector<std::string>& names) {
  std::ostringstream out;
  for (size_t i = 0; i < names.size() && i < kNamesShown; ++i) out << (i ? ", '" : "'") << names[i] << "'";
  if (names.size() > kNamesShown) out << " and " << names.size() - kNamesShown << " more";
  return out.str();
}

}  // namespace

std::string PeerShutdownMessage(const std::vector<int32_t>& ranks) {
  return std::string(ranks.size() == 1 ? "rank " : "ranks ") + JoinRanks(ranks) +
         " shut Horovod down (hvd.shutdown() was called there, or its process is exiting)";
}

std::string StopReasonKey(const std::string& key_prefix, int32_t rank) {
  return key_prefix + "/stop_reason/" + std::to_string(rank);
}

void PublishStopReason(KVStore* store, const std::string& key_prefix, int32_t rank, const Status& reason) {
  const std::string& m = reason.message();
  // A failed write only costs the peers the detail: they still stop, naming this rank.
  (void)store->Set(StopReasonKey(key_prefix, rank), std::vector<uint8_t>(m.begin(), m.end()));
}

Status PeerFailure(KVStore* store, const std::string& key_prefix, const std::vector<int32_t>& failed_ranks,
                   int64_t timeout_ms) {
  std::string fallback = PeerShutdownMessage(failed_ranks) + " after failing";
  if (failed_ranks.empty()) return Status::Aborted(fallback);
  std::vector<uint8_t> reason;
  // Written before the rank raised its flag, so it is there unless the write itself failed.
  if (!store->Get(StopReasonKey(key_prefix, failed_ranks[0]), timeout_ms, &reason).ok() || reason.empty()) {
    return Status::Aborted(fallback);
  }
  return Status::Aborted(std::string(reason.begin(), reason.end()));
}

Status ExplainFailure(const Status& failure, const FailureContext& context) {
  if (failure.ok()) return failure;
  std::string message = failure.message();
  if (!context.pending.empty()) message += "; this rank was waiting for " + DescribePending(context.pending);
  if (context.store != nullptr && !context.report_key.empty() && context.report_wait_ms > 0) {
    std::vector<uint8_t> report;
    // A failed lookup (timeout, or the launcher already gone) only means there is nothing to add.
    if (context.store->Get(context.report_key, context.report_wait_ms, &report).ok() && !report.empty()) {
      message += "; the launcher reports: " + std::string(report.begin(), report.end());
    }
  }
  return failure.WithMessage(std::move(message));
}

}  // namespace hvdcore
