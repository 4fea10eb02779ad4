#include "dtypes.h"

#include <cstring>

#include "horovod/hvd_reduce.hpp"

namespace hvd_nccl {

// ncclBfloat16 came with NCCL 2.10.
constexpr int kBfloat16Version = NcclVersionCode(2, 10, 0);

bool ReduceType(const NcclApi& nccl, hvd_dtype dtype, ncclDataType_t* out) {
  switch (dtype) {
    case HVD_DTYPE_UINT8:
    case HVD_DTYPE_BOOL: *out = ncclUint8; return true;
    case HVD_DTYPE_INT8: *out = ncclInt8; return true;
    case HVD_DTYPE_INT32: *out = ncclInt32; return true;
    case HVD_DTYPE_INT64: *out = ncclInt64; return true;
    case HVD_DTYPE_FLOAT16: *out = ncclFloat16; return true;
    case HVD_DTYPE_BFLOAT16: *out = ncclBfloat16; return nccl.version >= kBfloat16Version;
    case HVD_DTYPE_FLOAT32: *out = ncclFloat32; return true;
    case HVD_DTYPE_FLOAT64: *out = ncclFloat64; return true;
    default: return false;  // int16: NCCL has no 16-bit integer type
  }
}

bool ReduceOp(hvd_dtype dtype, hvd_reduce_op op, ncclRedOp_t* out) {
  const bool boolean = dtype == HVD_DTYPE_BOOL;
  switch (op) {
    case HVD_REDUCE_SUM: *out = boolean ? ncclMax : ncclSum; return true;
    case HVD_REDUCE_MIN: *out = ncclMin; return true;
    case HVD_REDUCE_MAX: *out = ncclMax; return true;
    case HVD_REDUCE_PRODUCT: *out = boolean ? ncclMin : ncclProd; return true;
  }
  return false;
}

bool IsFloatingPoint(hvd_dtype dtype) {
  return dtype == HVD_DTYPE_FLOAT16 || dtype == HVD_DTYPE_BFLOAT16 || dtype == HVD_DTYPE_FLOAT32 ||
         dtype == HVD_DTYPE_FLOAT64;
}

size_t Bytes(hvd_dtype dtype, size_t count) { return count * hvd::dtype_size(dtype); }

void EncodeScalar(hvd_dtype dtype, double factor, uint64_t* scalar) {
  *scalar = 0;
  if (dtype == HVD_DTYPE_FLOAT64) {
    std::memcpy(scalar, &factor, sizeof factor);
  } else if (dtype == HVD_DTYPE_FLOAT32) {
    const float f = (float)factor;
    std::memcpy(scalar, &f, sizeof f);
  } else {
    const uint16_t bits =
        dtype == HVD_DTYPE_FLOAT16 ? hvd::float_to_half((float)factor) : hvd::float_to_bfloat((float)factor);
    std::memcpy(scalar, &bits, sizeof bits);
  }
}

}  // namespace hvd_nccl
