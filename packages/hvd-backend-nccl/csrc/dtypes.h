// hvd's dtypes and reduction ops as NCCL's. Data movement (broadcast, allgather, alltoall) needs
// no type: it moves bytes (ncclUint8), which also carries int16 and bool, which NCCL has no type
// for. Reductions need NCCL's type, and bool is reduced as bytes with min (AND) and max (OR).
#pragma once

#include <cstddef>
#include <cstdint>

#include "horovod/hvd_backend.h"
#include "nccl_api.h"

namespace hvd_nccl {

// NCCL's type for reducing `dtype` on `nccl`; false where it has none (int16; bfloat16 before 2.10).
bool ReduceType(const NcclApi& nccl, hvd_dtype dtype, ncclDataType_t* out);

// NCCL's op for `op` on `dtype`, or false for an op hvd does not define. hvd's bool convention
// (hvd_backend.h): MIN and PRODUCT are AND, MAX (and SUM, as hvd_reduce.hpp reduces it) OR.
bool ReduceOp(hvd_dtype dtype, hvd_reduce_op op, ncclRedOp_t* out);

bool IsFloatingPoint(hvd_dtype dtype);

// Bytes of `count` elements of `dtype`.
size_t Bytes(hvd_dtype dtype, size_t count);

// `factor` as one element of `dtype` (a float type), in `scalar`: PreMulSum's scalar argument.
void EncodeScalar(hvd_dtype dtype, double factor, uint64_t* scalar);

}  // namespace hvd_nccl
