// A stand-in for libnccl.so.2 in the backend's tests: it exports the NCCL functions the backend
// looks up, with NCCL's C types, and runs them for ranks that are threads of one process.
//
// Collectives run on the streams the backend passes, through the device table the test attaches
// (fake_nccl_attach: hvd-core's simulated device): on each member's own stream, a copy of its
// inputs to the host, one host function that meets the other members' (the rendezvous of one
// operation) and computes this member's results with hvd_reduce.hpp, and a copy of them back. So
// the device's checks of order (and of host code touching device memory) apply to the backend as
// they would to NCCL's kernels, and a member that never arrives leaves its peers' streams waiting,
// as it would on a GPU, until they abort.
//
// The control functions (fake_nccl_*) let a test choose the version reported, make a call fail,
// inject an asynchronous error, and read the log of what the backend asked for.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "horovod/hvd_device.h"

namespace fake {

// NCCL's values (nccl.h): results, types, built-in ops.
enum Result : int {
  kSuccess = 0,
  kUnhandledCuda = 1,
  kSystem = 2,
  kInternal = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemote = 6,
  kInProgress = 7
};
constexpr int kFirstCustomOp = 5;  // ncclNumOps: ops made by ncclRedOpCreatePreMulSum start here

// One call of a group: a collective (the same on every member, in the same order) or a send or
// receive (matched with the peer's, in order per pair).
struct Item {
  enum Kind { kAllReduce, kBroadcast, kReduce, kReduceScatter, kAllGather, kSend, kRecv } kind;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // elements: the send count (allgather, send), else the receive count
  int type = 0;      // ncclDataType_t
  int op = 0;        // ncclRedOp_t; a PreMulSum op's scalar is taken when the call is made
  double scale = 1;  // that scalar
  int root = 0;      // root, or the peer of a send or receive
  std::vector<char> input, output;  // host copies of the inputs and results
};

struct Clique;

// One member's communicator.
struct Comm {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  int nranks = 0;
  bool blocking = true;
  uint64_t next_op = 0;  // sequence number of this member's next group in the clique
  int pending_polls = 0;  // non-blocking: ncclInProgress for this many more polls
  bool aborted = false;   // guarded by the clique's mutex
  std::map<int, double> custom_ops;  // PreMulSum scalars by op
  std::string last_error;
};

// The members' operations meet here, by sequence number.
struct Clique {
  std::mutex mu;
  std::condition_variable cv;
  int nranks = 0;
  int joined = 0;
  struct Slot {
    int arrived = 0, departed = 0;
    std::vector<std::shared_ptr<std::vector<Item>>> parts;
  };
  std::map<uint64_t, Slot> slots;
};

}  // namespace fake

// What the backend holds as ncclComm_t: work still queued keeps the Comm itself alive.
struct Handle {
  std::shared_ptr<fake::Comm> comm;
};

namespace fake {

const hvd_device_v1* Device();

// Appends a line to the log tests read (fake_nccl_log).
void Log(const std::string& line);

// The failure a test asked for with fake_nccl_fail_next on `rank` for `call`, once; kSuccess if none.
int TakeFailure(int rank, const std::string& call);

// Queues `items` (one group) for `comm` on `stream`: copies in, the meeting, copies out.
int Queue(const std::shared_ptr<Comm>& comm, std::vector<Item> items, void* stream);

}  // namespace fake
