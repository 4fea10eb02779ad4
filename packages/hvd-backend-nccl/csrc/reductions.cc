// allreduce, allreduce_buffers (with the scaling of scaling.h), reducescatter and barrier.
#include <algorithm>

#include "collectives.h"
#include "dtypes.h"
#include "errors.h"
#include "horovod/hvd_reduce.hpp"
#include "queue.h"
#include "scaling.h"

namespace hvd_nccl {
namespace {

// Buffers of one allreduce_buffers call queued per NCCL group: NCCL runs a group's collectives as
// few kernels; a bound keeps any one group's set-up small when the engine passes many tensors.
constexpr size_t kGroupLimit = 256;

// NCCL's type and op for a reduction, or a refusal naming what NCCL lacks.
int ReductionArgs(hvd_comm* comm, const char* op_name, hvd_dtype dtype, hvd_reduce_op op, ncclDataType_t* type,
                  ncclRedOp_t* nccl_op) {
  if (!ReduceOp(dtype, op, nccl_op)) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT, Prefix(comm, op_name) + "unknown reduction op " + std::to_string(op));
  }
  if (!ReduceType(*comm->nccl, dtype, type)) {
    return Fail(comm, HVD_ERR_UNSUPPORTED,
                Prefix(comm, op_name) + "NCCL " + comm->nccl->version_text + " cannot reduce " +
                    hvd::dtype_name(dtype) + " tensors (int16 has no NCCL type; bfloat16 needs NCCL 2.10)");
  }
  return HVD_OK;
}

// The allreduces of `pairs`, `kGroupLimit` to a group, with `nccl_op`.
int QueueAllreduces(hvd_comm* comm, const hvd_buffer_pair* pairs, size_t n, ncclDataType_t type, ncclRedOp_t nccl_op,
                    size_t bytes) {
  const NcclApi* nccl = comm->nccl;
  for (size_t first = 0; first < n; first += kGroupLimit) {
    const size_t last = std::min(n, first + kGroupLimit);
    const char* call = "ncclAllReduce";
    ncclResult_t rc = Grouped(nccl, &call, [&] {
      for (size_t i = first; i < last; ++i) {
        if (!pairs[i].count) continue;
        ncclResult_t r = nccl->AllReduce(pairs[i].sendbuf, pairs[i].recvbuf, pairs[i].count, type, nccl_op,
                                         comm->nccl_comm, comm->stream);
        if (r != ncclSuccess && r != ncclInProgress) return r;
      }
      return ncclSuccess;
    });
    if (int status = Finish(comm, "allreduce", call, rc, bytes)) return status;
  }
  return HVD_OK;
}

}  // namespace

int Allreduce(hvd_comm* comm, const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op) {
  ncclDataType_t type;
  ncclRedOp_t nccl_op;
  if (int status = ReductionArgs(comm, "allreduce", dtype, op, &type, &nccl_op)) return status;
  if (count == 0) return Failed(comm);
  if (int status = Begin(comm, "allreduce")) return status;
  ncclResult_t rc = comm->nccl->AllReduce(sendbuf, recvbuf, count, type, nccl_op, comm->nccl_comm, comm->stream);
  return Finish(comm, "allreduce", "ncclAllReduce", rc, Bytes(dtype, count));
}

int AllreduceBuffers(hvd_comm* comm, const hvd_buffer_pair* buffers, size_t n, hvd_dtype dtype, hvd_reduce_op op,
                     double postscale) {
  const Scaling scaling = ChooseScaling(*comm->nccl, dtype, op, postscale, comm->size);
  ncclDataType_t type;
  ncclRedOp_t nccl_op;
  if (scaling == Scaling::kDecline || ReductionArgs(comm, "allreduce", dtype, op, &type, &nccl_op) != HVD_OK) {
    return HVD_ERR_UNSUPPORTED;  // the engine calls allreduce and scales, or reports allreduce's refusal
  }
  size_t bytes = 0;
  for (size_t i = 0; i < n; ++i) bytes += Bytes(dtype, buffers[i].count);
  if (bytes == 0) return Failed(comm);
  if (int status = Begin(comm, "allreduce")) return status;
  if (scaling == Scaling::kAvg) nccl_op = ncclAvg;
  if (scaling != Scaling::kPreMulSum) return QueueAllreduces(comm, buffers, n, type, nccl_op, bytes);

  uint64_t scalar;
  EncodeScalar(dtype, postscale, &scalar);
  ncclResult_t rc = comm->nccl->RedOpCreatePreMulSum(&nccl_op, &scalar, type, ncclScalarHostImmediate, comm->nccl_comm);
  if (int status = Settle(comm, "allreduce", "ncclRedOpCreatePreMulSum", rc)) return status;
  const int status = QueueAllreduces(comm, buffers, n, type, nccl_op, bytes);
  // May go as soon as the calls given it have returned; an aborted communicator took it along.
  if (!comm->aborted) comm->nccl->RedOpDestroy(nccl_op, comm->nccl_comm);
  return status;
}

int Reducescatter(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                  hvd_reduce_op op) {
  ncclDataType_t type;
  ncclRedOp_t nccl_op;
  if (int status = ReductionArgs(comm, "reducescatter", dtype, op, &type, &nccl_op)) return status;
  size_t total = 0;
  bool even = true;
  for (int32_t i = 0; i < comm->size; ++i) {
    total += recvcounts[i];
    even = even && recvcounts[i] == recvcounts[0];
  }
  if (total == 0) return Failed(comm);
  if (int status = Begin(comm, "reducescatter")) return status;
  const NcclApi* nccl = comm->nccl;
  if (even) {
    ncclResult_t rc =
        nccl->ReduceScatter(sendbuf, recvbuf, recvcounts[0], type, nccl_op, comm->nccl_comm, comm->stream);
    return Finish(comm, "reducescatter", "ncclReduceScatter", rc, Bytes(dtype, total));
  }
  // Ragged blocks: NCCL's reducescatter takes one count for all. One ncclReduce per block, rooted
  // at the member that keeps it, in one group: no scratch memory, no padding copied, and each
  // block moves once (padding to the largest block would move size x largest elements instead).
  const char* call = "ncclReduce";
  const char* send = static_cast<const char*>(sendbuf);
  ncclResult_t rc = Grouped(nccl, &call, [&] {
    size_t offset = 0;
    for (int32_t i = 0; i < comm->size; ++i) {
      const size_t count = recvcounts[i];
      if (count) {
        ncclResult_t r = nccl->Reduce(send + Bytes(dtype, offset), i == comm->rank ? recvbuf : nullptr, count, type,
                                      nccl_op, i, comm->nccl_comm, comm->stream);
        if (r != ncclSuccess && r != ncclInProgress) return r;
      }
      offset += count;
    }
    return ncclSuccess;
  });
  return Finish(comm, "reducescatter", call, rc, Bytes(dtype, total));
}

int Barrier(hvd_comm* comm) {
  if (int status = Begin(comm, "barrier")) return status;
  // NCCL has no barrier: a one-byte allreduce completes on no member before every member reached it.
  if (!comm->barrier_scratch) {
    if (int rc = comm->device->device_alloc(comm->device_id, 1, &comm->barrier_scratch)) {
      return DeviceFailed(comm, "barrier", "device_alloc", rc);
    }
  }
  ncclResult_t rc = comm->nccl->AllReduce(comm->barrier_scratch, comm->barrier_scratch, 1, ncclUint8, ncclMax,
                                          comm->nccl_comm, comm->stream);
  return Finish(comm, "barrier", "ncclAllReduce", rc, 1);
}

}  // namespace hvd_nccl
