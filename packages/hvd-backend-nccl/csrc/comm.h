// The communicator behind the opaque hvd_comm handle, shared by every source of the backend.
//
// One hvd_comm per process set (the engine creates it); its NCCL communicator is made at the first
// collective (comm_create only records what it needs) and kept for the hvd_comm's lifetime: the
// unique id comes from member 0 through the engine's store, and ncclCommInitRank runs with the
// comm's device current. Work is queued on the engine's stream through its device table; each
// call returns once NCCL has queued it, and the watchdog (watchdog.h) follows it to completion.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "horovod/hvd_backend.h"
#include "nccl_api.h"

// One collective queued on the stream and not yet seen complete.
struct InFlight {
  hvd_event_t event;  // recorded on the stream after the collective
  const char* op;     // "allreduce"
  std::string what;   // "allreduce of 4096 bytes", for a timeout's message
  std::chrono::steady_clock::time_point queued;
};

struct hvd_comm {
  int32_t rank = 0;
  int32_t size = 1;
  int32_t device_id = 0;
  std::vector<int32_t> job_ranks;  // job-level rank of each member, for messages
  std::string key_prefix;
  std::chrono::milliseconds timeout{0};
  hvd_store_v1 store{};  // the engine's table, copied; its ctx lives as long as the engine
  const hvd_device_v1* device = nullptr;
  hvd_stream_t stream = nullptr;
  const hvd_nccl::NcclApi* nccl = nullptr;

  hvd_nccl::ncclComm_t nccl_comm = nullptr;  // made by the first collective (EnsureNcclComm)
  bool non_blocking = false;                 // nccl_comm made with blocking = 0 (NCCL >= 2.14)
  void* barrier_scratch = nullptr;           // one float on the device, for barrier()

  // The first failure of NCCL or the device is kept (errors.h, Poison): once set, every call
  // fails with it, since an NCCL communicator does not recover from an error and an aborted one
  // is gone. A refused argument is not such a failure (Fail).
  std::atomic<int> failed{HVD_OK};
  std::atomic<bool> aborted{false};
  std::mutex mu;  // guards the members below against a watchdog thread the engine may poll from
  std::string failure;  // the message of `failed`
  std::deque<InFlight> in_flight;
  const char* last_op = "communicator";  // the op an asynchronous error is told under when none is in flight
  std::vector<hvd_event_t> spare_events;
  std::string last_error;
};

namespace hvd_nccl {

// "rank 0 of 2" or "rank 3, member 1 of process set [1, 3]".
std::string Describe(const hvd_comm* comm);

// Makes the NCCL communicator unless it exists: collective over the members at their first
// collective. HVD_OK or the status recorded as the comm's error.
int EnsureNcclComm(hvd_comm* comm, const char* op);

// Waits, with the comm's deadline, until a non-blocking communicator has finished the call just
// made (ncclCommGetAsyncError leaves ncclInProgress); immediate for a blocking one. On a failure
// or the deadline the communicator is aborted (a half-queued group cannot be used again).
int WaitQueued(hvd_comm* comm, const char* op, ncclResult_t rc);

// The ABI functions, installed in the tables by backend.cc.
int CommCreate(const hvd_comm_config_v1* config, const hvd_store_v1* store, hvd_comm** out, char* error,
               size_t error_len);
void CommDestroy(hvd_comm* comm);
const char* LastError(const hvd_comm* comm);

}  // namespace hvd_nccl
