#include "datatypes.h"

#include <mutex>

#include "horovod/hvd_reduce.hpp"

namespace hvd_mpi {
namespace {

constexpr int kOpCount = 4;  // hvd_reduce_op: SUM, MIN, MAX, PRODUCT

// inoutvec[i] = invec[i] op inoutvec[i], as MPI asks of a user operation (all of ours commute).
template <hvd_dtype D, hvd_reduce_op O>
void UserReduce(void* invec, void* inoutvec, int* len, MPI_Datatype*) {
  hvd::reduce_into(D, O, inoutvec, invec, (size_t)*len);
}

template <hvd_dtype D>
MPI_User_function* UserFunctionFor(hvd_reduce_op op) {
  switch (op) {
    case HVD_REDUCE_SUM: return &UserReduce<D, HVD_REDUCE_SUM>;
    case HVD_REDUCE_MIN: return &UserReduce<D, HVD_REDUCE_MIN>;
    case HVD_REDUCE_MAX: return &UserReduce<D, HVD_REDUCE_MAX>;
    case HVD_REDUCE_PRODUCT: return &UserReduce<D, HVD_REDUCE_PRODUCT>;
  }
  return nullptr;
}

// The hvd_reduce.hpp loop for a (dtype, op) MPI cannot reduce with hvd's semantics; null otherwise.
MPI_User_function* UserFunction(hvd_dtype dtype, hvd_reduce_op op) {
  bool min_or_max = op == HVD_REDUCE_MIN || op == HVD_REDUCE_MAX;
  switch (dtype) {
    case HVD_DTYPE_FLOAT16: return UserFunctionFor<HVD_DTYPE_FLOAT16>(op);
    case HVD_DTYPE_BFLOAT16: return UserFunctionFor<HVD_DTYPE_BFLOAT16>(op);
    case HVD_DTYPE_FLOAT32: return min_or_max ? UserFunctionFor<HVD_DTYPE_FLOAT32>(op) : nullptr;
    case HVD_DTYPE_FLOAT64: return min_or_max ? UserFunctionFor<HVD_DTYPE_FLOAT64>(op) : nullptr;
    default: return nullptr;
  }
}

MPI_Op PredefinedOp(hvd_dtype dtype, hvd_reduce_op op) {
  if (dtype == HVD_DTYPE_BOOL) {  // hvd's bool: MIN and PRODUCT are AND, MAX and SUM are OR
    return (op == HVD_REDUCE_MIN || op == HVD_REDUCE_PRODUCT) ? MPI_LAND : MPI_LOR;
  }
  switch (op) {
    case HVD_REDUCE_SUM: return MPI_SUM;
    case HVD_REDUCE_MIN: return MPI_MIN;
    case HVD_REDUCE_MAX: return MPI_MAX;
    case HVD_REDUCE_PRODUCT: return MPI_PROD;
  }
  return MPI_OP_NULL;
}

std::mutex g_mutex;
MPI_Op g_user_ops[HVD_DTYPE_COUNT][kOpCount];
bool g_user_ops_ready = false;

}  // namespace

MPI_Datatype DatatypeOf(hvd_dtype dtype) {
  switch (dtype) {
    case HVD_DTYPE_UINT8: return MPI_UINT8_T;
    case HVD_DTYPE_INT8: return MPI_INT8_T;
    case HVD_DTYPE_INT16: return MPI_INT16_T;
    case HVD_DTYPE_INT32: return MPI_INT32_T;
    case HVD_DTYPE_INT64: return MPI_INT64_T;
    case HVD_DTYPE_FLOAT16: return MPI_UINT16_T;
    case HVD_DTYPE_BFLOAT16: return MPI_UINT16_T;
    case HVD_DTYPE_FLOAT32: return MPI_FLOAT;
    case HVD_DTYPE_FLOAT64: return MPI_DOUBLE;
    case HVD_DTYPE_BOOL: return MPI_UINT8_T;  // numpy's bools are bytes holding 0 or 1
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op OpOf(hvd_dtype dtype, hvd_reduce_op op) {
  if (DatatypeOf(dtype) == MPI_DATATYPE_NULL || op < HVD_REDUCE_SUM || op > HVD_REDUCE_PRODUCT) return MPI_OP_NULL;
  MPI_User_function* user = UserFunction(dtype, op);
  if (!user) return PredefinedOp(dtype, op);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_user_ops_ready) {
    for (auto& row : g_user_ops)
      for (MPI_Op& o : row) o = MPI_OP_NULL;
    g_user_ops_ready = true;
  }
  MPI_Op& slot = g_user_ops[dtype][op];
  if (slot == MPI_OP_NULL && MPI_Op_create(user, /*commute=*/1, &slot) != MPI_SUCCESS) slot = MPI_OP_NULL;
  return slot;
}

}  // namespace hvd_mpi
