#include "backend/device_comm.h"

namespace hvdcore {

void DeviceComm::Queued(std::shared_ptr<void> done, std::string what) {
  queued_.push_back({std::move(done), std::move(what)});
}

Status DeviceComm::Watch() {
  while (!queued_.empty()) {
    int done = 0;
    if (device_->event_query(queued_.front().done.get(), &done) != HVD_OK || !done) break;
    queued_.pop_front();
  }
  if (aborted_) return Status::Ok();
  // Asked also while nothing is queued: NCCL's own watch of a communicator (a peer lost) reports
  // through it at any time, and asking costs a few loads.
  Status st = comm_->AsyncError();
  if (st.ok()) return st;
  aborted_ = true;
  comm_->Abort();  // the stream drains: the callers' streams, waiting on it, go on
  std::string in_flight;
  for (const Work& w : queued_) in_flight += (in_flight.empty() ? "" : "; ") + w.what;
  queued_.clear();
  if (in_flight.empty()) return st;
  return Status::Aborted(st.message() + " (queued and not complete: " + in_flight + ")");
}

}  // namespace hvdcore
