#include "scaling.h"

#include "dtypes.h"

namespace hvd_nccl {

Scaling ChooseScaling(const NcclApi& nccl, hvd_dtype dtype, hvd_reduce_op op, double postscale, int32_t size) {
  if (postscale == 1.0) return Scaling::kNone;
  if (op != HVD_REDUCE_SUM || !IsFloatingPoint(dtype)) return Scaling::kDecline;
  if (postscale == 1.0 / size && nccl.has_avg()) return Scaling::kAvg;
  if (nccl.has_pre_mul_sum()) return Scaling::kPreMulSum;
  return Scaling::kDecline;
}

}  // namespace hvd_nccl
