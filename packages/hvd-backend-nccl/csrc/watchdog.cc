#include "watchdog.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "errors.h"

namespace hvd_nccl {
namespace {

using Clock = std::chrono::steady_clock;

std::string Seconds(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

// With comm->mu held: moves the ops seen complete (in queue order: they share one stream) to the
// spare events. *idle when none is left; a device failure's status otherwise HVD_OK.
int ReapLocked(hvd_comm* comm, bool* idle) {
  while (!comm->in_flight.empty()) {
    int done = 0;
    if (int rc = comm->device->event_query(comm->in_flight.front().event, &done)) {
      *idle = false;
      return rc;
    }
    if (!done) break;
    comm->spare_events.push_back(comm->in_flight.front().event);
    comm->in_flight.pop_front();
  }
  *idle = comm->in_flight.empty();
  return HVD_OK;
}

// Polls until every queued op completed (true), an error appears or `deadline` passes (false).
bool WaitIdle(hvd_comm* comm, Clock::time_point deadline) {
  for (;;) {
    bool idle = false;
    int rc;
    {
      std::lock_guard<std::mutex> lock(comm->mu);
      rc = ReapLocked(comm, &idle);
    }
    if (idle) return true;
    if (rc != HVD_OK || Clock::now() > deadline) return false;
    if (!comm->aborted && AsyncError(comm) != HVD_OK) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// ncclCommFinalize (non-blocking communicators, 2.14): flushes NCCL's own pending work with a
// deadline, after which ncclCommDestroy only frees. Blocking ones need no such step.
bool Finalize(hvd_comm* comm, Clock::time_point deadline) {
  const NcclApi* nccl = comm->nccl;
  if (!comm->non_blocking || !nccl->CommFinalize) return true;
  ncclResult_t state = nccl->CommFinalize(comm->nccl_comm);
  while (state == ncclInProgress && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (ncclResult_t rc = nccl->CommGetAsyncError(comm->nccl_comm, &state)) state = rc;
  }
  return state == ncclSuccess;
}

}  // namespace

int Track(hvd_comm* comm, const char* op, size_t bytes) {
  hvd_event_t event = nullptr;
  bool idle = false;
  int rc;
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    rc = ReapLocked(comm, &idle);  // keeps the list short when the engine seldom polls
    if (!comm->spare_events.empty()) {
      event = comm->spare_events.back();
      comm->spare_events.pop_back();
    }
  }
  if (rc != HVD_OK) return DeviceFailed(comm, op, "event_query", rc);
  if (!event && (rc = comm->device->event_create(comm->device_id, &event))) {
    return DeviceFailed(comm, op, "event_create", rc);
  }
  if ((rc = comm->device->event_record(event, comm->stream))) {
    comm->device->event_destroy(event);
    return DeviceFailed(comm, op, "event_record", rc);
  }
  std::lock_guard<std::mutex> lock(comm->mu);
  comm->in_flight.push_back({event, op, std::string(op) + " of " + std::to_string(bytes) + " bytes", Clock::now()});
  comm->last_op = op;
  return HVD_OK;
}

int AsyncError(hvd_comm* comm) {
  if (int status = Failed(comm)) return status;
  const char* op;
  std::string late;
  Clock::duration waited{};
  bool idle = false;
  int rc;
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    rc = ReapLocked(comm, &idle);
    op = comm->last_op;
    if (!comm->in_flight.empty()) {
      const InFlight& oldest = comm->in_flight.front();
      op = oldest.op;
      waited = Clock::now() - oldest.queued;
      if (waited > comm->timeout) late = oldest.what;
    }
  }
  if (rc != HVD_OK) return DeviceFailed(comm, op, "event_query", rc);
  if (comm->nccl_comm && !comm->aborted) {
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t polled = comm->nccl->CommGetAsyncError(comm->nccl_comm, &state)) state = polled;
    if (state != ncclSuccess && state != ncclInProgress) {
      return Poison(comm, StatusOf(state),
                    Prefix(comm, op) + "NCCL reported an asynchronous error: " + NcclWords(comm, state));
    }
  }
  if (!late.empty()) {
    return Poison(comm, HVD_ERR_TIMEOUT,
                  Prefix(comm, op) + "the " + late + " queued " + Seconds(waited) +
                      " ago has not completed within the communicator's timeout of " + Seconds(comm->timeout) +
                      " (HOROVOD_NCCL_TIMEOUT): a member stopped taking part, or the GPU is stuck");
  }
  return HVD_OK;
}

void AbortNccl(hvd_comm* comm) {
  if (comm->aborted.exchange(true)) return;
  if (comm->nccl_comm) comm->nccl->CommAbort(comm->nccl_comm);  // frees it: never used again
  comm->nccl_comm = nullptr;
}

int Abort(hvd_comm* comm) {
  // Keeps an earlier failure as the cause; otherwise this is the reason later calls give.
  Poison(comm, HVD_ERR_INTERNAL, Prefix(comm, "abort") + "the communicator was aborted");
  AbortNccl(comm);
  return HVD_OK;
}

void Retire(hvd_comm* comm) {
  bool idle = WaitIdle(comm, Clock::now() + comm->timeout);
  if (comm->nccl_comm && !comm->aborted) {
    if (idle && Finalize(comm, Clock::now() + comm->timeout)) {
      comm->nccl->CommDestroy(comm->nccl_comm);
      comm->nccl_comm = nullptr;
    } else {
      AbortNccl(comm);
    }
  }
  // After an abort NCCL's kernels return and the stream drains.
  if (!idle) idle = WaitIdle(comm, Clock::now() + comm->timeout);
  if (!idle) return;  // the device may still record these events or read the scratch: left as they are
  for (hvd_event_t event : comm->spare_events) comm->device->event_destroy(event);
  comm->spare_events.clear();
  if (comm->barrier_scratch) comm->device->device_free(comm->barrier_scratch);
  comm->barrier_scratch = nullptr;
}

}  // namespace hvd_nccl
