// How allreduce_buffers scales a sum by `postscale` (the engine's averages and postscale factors).
//
// Inside NCCL where it can, so that no pass of the engine's over the result is needed:
//   - kAvg: ncclAvg (2.10) when postscale is exactly 1/size (an average);
//   - kPreMulSum: ncclRedOpCreatePreMulSum (2.11) with postscale as the scalar, in the dtype.
// Both multiply before summing, (x0 * s) + (x1 * s) + ..., where the engine would compute
// (x0 + x1 + ...) * s: equal but for rounding, and less prone to overflow in float16.
// Anything else (another op, integers, whose engine scaling truncates; an older NCCL) is declined:
// the engine then calls allreduce and scales itself. The choice depends only on what every member
// passes alike and on NCCL's release, so every member makes the same one.
#pragma once

#include "horovod/hvd_backend.h"
#include "nccl_api.h"

namespace hvd_nccl {

enum class Scaling { kNone, kAvg, kPreMulSum, kDecline };

Scaling ChooseScaling(const NcclApi& nccl, hvd_dtype dtype, hvd_reduce_op op, double postscale, int32_t size);

}  // namespace hvd_nccl
