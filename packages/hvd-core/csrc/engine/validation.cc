#include "engine/validation.h"

#include <cmath>

#include "execution/adasum_math.h"
#include "horovod/hvd_reduce.hpp"
#include "negotiation/message.h"

namespace hvdcore {
namespace {

std::string Quote(const TensorEntry& e) { return std::string(OpTypeName(e.type)) + " of tensor '" + e.name + "'"; }

Status CheckReduction(const TensorEntry& e) {
  if (e.op == ReduceOp::kAdasum && e.type == OpType::kAllreduce && !AdasumDtype(e.input.dtype)) {
    return Status::InvalidArgument(Quote(e) +
                                   ": op=Adasum combines floating-point tensors only (float16, bfloat16, "
                                   "float32, float64), got " +
                                   hvd::dtype_name(e.input.dtype));
  }
  if (e.type == OpType::kReducescatter && e.op != ReduceOp::kSum && e.op != ReduceOp::kAverage) {
    return Status::InvalidArgument(Quote(e) + ": reducescatter supports op=Sum and op=Average, got " +
                                   ReduceOpName(e.op));
  }
  if (e.input.dtype == HVD_DTYPE_BOOL) {
    if (e.op == ReduceOp::kSum || e.op == ReduceOp::kAverage) {
      return Status::InvalidArgument(Quote(e) + ": op=" + ReduceOpName(e.op) +
                                     " is not defined for bool tensors; use Min (logical and) or Max (logical or)");
    }
    if (e.prescale != 1.0 || e.postscale != 1.0) {
      return Status::InvalidArgument(Quote(e) + ": scale factors cannot be applied to bool tensors");
    }
  }
  if (!std::isfinite(e.prescale) || !std::isfinite(e.postscale)) {
    return Status::InvalidArgument(Quote(e) + ": prescale_factor and postscale_factor must be finite");
  }
  return Status::Ok();
}

Status CheckOutput(const TensorEntry& e) {
  if (!e.output.data && e.input.num_elements() > 0) {
    return Status::InvalidArgument(Quote(e) + ": no output buffer given");
  }
  if (e.output.num_elements() != e.input.num_elements() || e.output.dtype != e.input.dtype) {
    return Status::InvalidArgument(Quote(e) + ": the output buffer has shape " + ShapeString(e.output.shape) + " (" +
                                   hvd::dtype_name(e.output.dtype) + "), the input " + ShapeString(e.input.shape) +
                                   " (" + hvd::dtype_name(e.input.dtype) + ")");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateEntry(const TensorEntry& e, int32_t set_size, uint32_t device_kinds) {
  if (e.name.empty()) return Status::InvalidArgument(std::string(OpTypeName(e.type)) + ": the tensor name is empty");
  if (e.name.size() > kMaxNameBytes)
    return Status::InvalidArgument(Quote(e).substr(0, 80) + "...: the name is too long");
  bool data_op = e.type == OpType::kAllreduce || e.type == OpType::kAllgather || e.type == OpType::kBroadcast ||
                 e.type == OpType::kAlltoall || e.type == OpType::kReducescatter;
  if (!data_op) return Status::Ok();
  if ((unsigned)e.input.dtype >= HVD_DTYPE_COUNT) return Status::InvalidArgument(Quote(e) + ": unknown dtype");
  if (!(e.input.device_kind & device_kinds)) {
    return Status::InvalidArgument(Quote(e) + ": the tensor is on a " +
                                   (e.input.device_kind == HVD_DEVICE_CUDA ? "CUDA" : "non-CPU") +
                                   " device, but no backend serving that device is loaded (for CUDA tensors install "
                                   "hvd-backend-nccl)");
  }
  if (e.input.shape.size() > kMaxDims) return Status::InvalidArgument(Quote(e) + ": too many dimensions");
  for (int64_t d : e.input.shape)
    if (d < 0) return Status::InvalidArgument(Quote(e) + ": negative dimension in shape " + ShapeString(e.input.shape));
  if (e.input.num_elements() > 0 && !e.input.data) return Status::InvalidArgument(Quote(e) + ": null data pointer");
  bool needs_rows = e.type == OpType::kAllgather || e.type == OpType::kAlltoall || e.type == OpType::kReducescatter;
  if (needs_rows && e.input.shape.empty()) {
    return Status::InvalidArgument(Quote(e) + ": " + OpTypeName(e.type) +
                                   " needs a tensor with at least one dimension, got a scalar");
  }
  switch (e.type) {
    case OpType::kAllreduce: {
      Status s = CheckReduction(e);
      return s.ok() ? CheckOutput(e) : s;
    }
    case OpType::kReducescatter: return CheckReduction(e);
    case OpType::kBroadcast:
      if (e.root < 0 || e.root >= set_size) {
        return Status::InvalidArgument(Quote(e) + ": root rank " + std::to_string(e.root) +
                                       " is out of range for a process set of size " + std::to_string(set_size));
      }
      return CheckOutput(e);
    case OpType::kAlltoall: {
      int64_t rows = e.input.shape[0];
      if (e.splits.empty()) {
        if (rows % set_size != 0) {
          return Status::InvalidArgument(Quote(e) + ": without splits the first dimension (" + std::to_string(rows) +
                                         ") must be divisible by the number of ranks (" + std::to_string(set_size) +
                                         ")");
        }
        return Status::Ok();
      }
      if ((int32_t)e.splits.size() != set_size) {
        return Status::InvalidArgument(Quote(e) + ": splits has " + std::to_string(e.splits.size()) +
                                       " entries, expected one per rank (" + std::to_string(set_size) + ")");
      }
      int64_t sum = 0;
      for (int64_t s : e.splits) {
        if (s < 0) return Status::InvalidArgument(Quote(e) + ": splits must not be negative");
        sum += s;
      }
      if (sum != rows) {
        return Status::InvalidArgument(Quote(e) + ": splits sum to " + std::to_string(sum) +
                                       ", but the first dimension is " + std::to_string(rows));
      }
      return Status::Ok();
    }
    default: return Status::Ok();
  }
}

}  // namespace hvdcore
