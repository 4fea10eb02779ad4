#include "core/common.h"

#include <sstream>

namespace hvdcore {

const char* OpTypeName(OpType t) {
  switch (t) {
    case OpType::kAllreduce: return "allreduce";
    case OpType::kAllgather: return "allgather";
    case OpType::kBroadcast: return "broadcast";
    case OpType::kAlltoall: return "alltoall";
    case OpType::kReducescatter: return "reducescatter";
    case OpType::kBarrier: return "barrier";
    case OpType::kJoin: return "join";
    case OpType::kAddProcessSet: return "add_process_set";
    case OpType::kRemoveProcessSet: return "remove_process_set";
  }
  return "unknown";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kAverage: return "Average";
    case ReduceOp::kSum: return "Sum";
    case ReduceOp::kAdasum: return "Adasum";
    case ReduceOp::kMin: return "Min";
    case ReduceOp::kMax: return "Max";
    case ReduceOp::kProduct: return "Product";
  }
  return "unknown";
}

hvd_reduce_op BackendReduceOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMin: return HVD_REDUCE_MIN;
    case ReduceOp::kMax: return HVD_REDUCE_MAX;
    case ReduceOp::kProduct: return HVD_REDUCE_PRODUCT;
    default: return HVD_REDUCE_SUM;
  }
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

std::string RanksString(const std::vector<int32_t>& ranks) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < ranks.size(); ++i) s << (i ? ", " : "") << ranks[i];
  s << "]";
  return s.str();
}

}  // namespace hvdcore
