#include "diagnostics/failure_report.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>

namespace hvdcore {

namespace {

constexpr size_t kNamesShown = 3;

constexpr size_t kRanksShown = 8;

std::string JoinRanks(const std::vector<int32_t>& ranks) {
  std::ostringstream out;
  const size_t shown = std::min(ranks.size(), kRanksShown);
  for (size_t i = 0; i < shown; ++i) {
    if (i) out << (i + 1 == ranks.size() ? " and " : ", ");
    out << ranks[i];
  }
  if (ranks.size() > shown) out << " and " << ranks.size() - shown << " more";
  return out.str();
}

std::string DescribePending(const std::vector<std::string>& names) {
  std::ostringstream out;
  for (size_t i = 0; i < names.size() && i < kNamesShown; ++i) out << (i ? ", '" : "'") << names[i] << "'";
  if (names.size() > kNamesShown) out << " and " << names.size() - kNamesShown << " more";
  return out.str();
}

// The launcher's report, once it is there and not empty (an empty one was withdrawn: a rank seen
// stopped ran again), or "" after `wait_ms`. A failed lookup (the launcher gone) only means there
// is nothing to add.
std::string AwaitReport(KVStore& store, const std::string& key, int64_t wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "";
    std::vector<uint8_t> report;
    if (!store.Get(key, left.count(), &report).ok()) return "";
    if (!report.empty()) return std::string(report.begin(), report.end());
    std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(50)));
  }
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
  // Without a store shared by the ranks (a backend that connects them by itself) the reason cannot
  // travel; the members of the set that stalled raise it themselves.
  std::string fallback = std::string(failed_ranks.size() == 1 ? "rank " : "ranks ") + JoinRanks(failed_ranks) +
                         " stopped Horovod after a failure of their own (a stall shutdown in a process set this rank "
                         "is not in); their error says which tensor stalled";
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
    std::string report = AwaitReport(*context.store, context.report_key, context.report_wait_ms);
    if (!report.empty()) message += "; the launcher reports: " + report;
  }
  return failure.WithMessage(std::move(message));
}

}  // namespace hvdcore
