#include "common/reduce_fn.h"

#include <cstring>

#include "horovod/hvd_reduce.hpp"

namespace hvd_common {
namespace {

// One instantiation per (dtype, op): the switches of hvd::reduce_into fold away and the loops
// vectorise (built with -O3).
template <hvd_dtype D, hvd_reduce_op O>
void Reduce(void* c, const void* a, const void* b, size_t n) {
  if (c == a) {
    hvd::reduce_into(D, O, c, b, n);
  } else if (c == b) {
    hvd::reduce_into(D, O, c, a, n);  // every op is commutative
  } else {
    std::memcpy(c, a, n * hvd::dtype_size(D));
    hvd::reduce_into(D, O, c, b, n);
  }
}

template <hvd_dtype D>
ReduceFn ForOp(hvd_reduce_op op) {
  switch (op) {
    case HVD_REDUCE_SUM: return &Reduce<D, HVD_REDUCE_SUM>;
    case HVD_REDUCE_MIN: return &Reduce<D, HVD_REDUCE_MIN>;
    case HVD_REDUCE_MAX: return &Reduce<D, HVD_REDUCE_MAX>;
    case HVD_REDUCE_PRODUCT: return &Reduce<D, HVD_REDUCE_PRODUCT>;
  }
  return nullptr;
}

}  // namespace

ReduceFn ReduceFunction(hvd_dtype dtype, hvd_reduce_op op) {
  switch (dtype) {
    case HVD_DTYPE_UINT8: return ForOp<HVD_DTYPE_UINT8>(op);
    case HVD_DTYPE_INT8: return ForOp<HVD_DTYPE_INT8>(op);
    case HVD_DTYPE_INT16: return ForOp<HVD_DTYPE_INT16>(op);
    case HVD_DTYPE_INT32: return ForOp<HVD_DTYPE_INT32>(op);
    case HVD_DTYPE_INT64: return ForOp<HVD_DTYPE_INT64>(op);
    case HVD_DTYPE_FLOAT16: return ForOp<HVD_DTYPE_FLOAT16>(op);
    case HVD_DTYPE_BFLOAT16: return ForOp<HVD_DTYPE_BFLOAT16>(op);
    case HVD_DTYPE_FLOAT32: return ForOp<HVD_DTYPE_FLOAT32>(op);
    case HVD_DTYPE_FLOAT64: return ForOp<HVD_DTYPE_FLOAT64>(op);
    case HVD_DTYPE_BOOL: return ForOp<HVD_DTYPE_BOOL>(op);
  }
  return nullptr;
}

}  // namespace hvd_common
