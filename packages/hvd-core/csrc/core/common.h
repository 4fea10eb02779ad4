// Types shared by every part of the engine: status, op kinds, tensor views.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "horovod/hvd_backend.h"

namespace hvdcore {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument = 1,  // the caller's fault, detected locally: raised as ValueError
  kMismatch = 2,         // ranks disagree about a collective: raised as RuntimeError on every rank
  kAborted = 3,          // communication failed, a peer was lost or the engine stopped
};

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
  static Status Mismatch(std::string m) { return Status(StatusCode::kMismatch, std::move(m)); }
  static Status Aborted(std::string m) { return Status(StatusCode::kAborted, std::move(m)); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The same kind of failure, told differently (with context added).
  Status WithMessage(std::string m) const { return Status(code_, std::move(m)); }

 private:
  Status(StatusCode c, std::string m) : code_(c), message_(std::move(m)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Thrown across the binding boundary; the module translates it into the Python exception that
// horovod.common registered for its code.
struct StatusError {
  Status status;
  // A refused group member whose refusal the engine has queued already (Engine::Enqueue): the
  // caller must not refuse it again (Engine::Refuse), which, once the group completed meanwhile,
  // would leave a refusal of a group nobody completes, holding the name.
  bool refusal_queued = false;
};

enum class OpType : uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,
  kAddProcessSet = 7,
  kRemoveProcessSet = 8,
};
constexpr uint8_t kOpTypeCount = 9;
// Changes of the process sets, which the engine runs itself rather than the executor.
constexpr bool IsProcessSetChange(OpType t) { return t == OpType::kAddProcessSet || t == OpType::kRemoveProcessSet; }

// Numbering follows Horovod's public constants (Average=0, Sum=1, Adasum=2, Min=3, Max=4, Product=5).
enum class ReduceOp : uint8_t { kAverage = 0, kSum = 1, kAdasum = 2, kMin = 3, kMax = 4, kProduct = 5 };
constexpr uint8_t kReduceOpCount = 6;

const char* OpTypeName(OpType t);
const char* ReduceOpName(ReduceOp op);
// The backend op for a user op (Average sums, then scales).
hvd_reduce_op BackendReduceOp(ReduceOp op);

// A framework-free description of one tensor. The framework layer keeps the tensor alive until
// the operation completes; the engine only borrows the pointer.
struct TensorView {
  void* data = nullptr;
  hvd_dtype dtype = HVD_DTYPE_FLOAT32;
  std::vector<int64_t> shape;
  uint32_t device_kind = HVD_DEVICE_CPU;
  int32_t device_id = -1;
  // Accelerator tensors will carry a ready event here (waited on before the engine reads the data).
  void* ready_event = nullptr;

  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

std::string ShapeString(const std::vector<int64_t>& shape);
std::string RanksString(const std::vector<int32_t>& ranks);

inline int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace hvdcore
