// The collectives of the ABI: each checks its arguments, returns at once from an empty collective
// (every member passes the same counts, so every member returns), and hands the call to the
// communicator's transport (transport.h), inside Guarded() so that no exception crosses the ABI.
#include <new>
#include <string>

#include "comm.h"
#include "common/buffer_list.h"
#include "common/elements.h"
#include "common/reduce_fn.h"
#include "errors.h"

namespace hvd_gloo {
namespace {

using hvd_common::BufferList;
using hvd_common::KnownDtype;
using hvd_common::ReduceFunction;
using hvd_common::Sum;

int Invalid(hvd_comm* comm, const char* op, const std::string& what) {
  return Fail(comm, HVD_ERR_INVALID_ARGUMENT, "gloo " + std::string(op) + " (" + Describe(comm) + "): " + what);
}

}  // namespace

int Allreduce(hvd_comm* comm, const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op) {
  if (!ReduceFunction(dtype, op)) return Invalid(comm, "allreduce", "unknown dtype or reduce op");
  if (count == 0) return HVD_OK;
  return Guarded(comm, "allreduce", [&] { comm->transport->Allreduce(sendbuf, recvbuf, count, dtype, op); });
}

int AllreduceBuffers(hvd_comm* comm, const hvd_buffer_pair* pairs, size_t n, hvd_dtype dtype, hvd_reduce_op op,
                     double postscale) {
  if (!ReduceFunction(dtype, op)) return Invalid(comm, "allreduce", "unknown dtype or reduce op");
  if (n && !pairs) return Invalid(comm, "allreduce", "no buffers");
  if (postscale != 1.0 && dtype == HVD_DTYPE_BOOL) return Invalid(comm, "allreduce", "bool cannot be scaled");
  try {
    const BufferList buffers(pairs, n, hvd::dtype_size(dtype));
    if (buffers.count() == 0) return HVD_OK;
    return Guarded(comm, "allreduce", [&] { comm->transport->AllreduceBuffers(buffers, dtype, op, postscale); });
  } catch (const std::bad_alloc&) {  // the list of buffers itself; nothing may throw across the C ABI
    return Fail(comm, HVD_ERR_INTERNAL, "gloo allreduce (" + Describe(comm) + "): out of memory");
  }
}

int Allgatherv(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype) {
  if (!KnownDtype(dtype)) return Invalid(comm, "allgather", "unknown dtype");
  if (!recvcounts) return Invalid(comm, "allgather", "no receive counts");
  if (Sum(recvcounts, comm->size) == 0) return HVD_OK;
  return Guarded(comm, "allgather",
                 [&] { comm->transport->Allgatherv(sendbuf, recvbuf, recvcounts, hvd::dtype_size(dtype)); });
}

int Broadcast(hvd_comm* comm, void* buf, size_t count, hvd_dtype dtype, int32_t root) {
  if (!KnownDtype(dtype)) return Invalid(comm, "broadcast", "unknown dtype");
  if (root < 0 || root >= comm->size) {
    return Invalid(comm, "broadcast", "root " + std::to_string(root) + " is out of range");
  }
  if (count == 0) return HVD_OK;
  return Guarded(comm, "broadcast", [&] { comm->transport->Broadcast(buf, count, hvd::dtype_size(dtype), root); });
}

int Alltoallv(hvd_comm* comm, const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
              hvd_dtype dtype) {
  if (!KnownDtype(dtype) || !sendcounts || !recvcounts) return Invalid(comm, "alltoall", "unknown dtype or no counts");
  if (sendcounts[comm->rank] != recvcounts[comm->rank]) {
    return Invalid(comm, "alltoall",
                   "this member sends itself " + std::to_string(sendcounts[comm->rank]) + " elements but expects " +
                       std::to_string(recvcounts[comm->rank]));
  }
  return Guarded(comm, "alltoall",
                 [&] { comm->transport->Alltoallv(sendbuf, sendcounts, recvbuf, recvcounts, hvd::dtype_size(dtype)); });
}

int Reducescatter(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                  hvd_reduce_op op) {
  if (!ReduceFunction(dtype, op) || !recvcounts) {
    return Invalid(comm, "reducescatter", "unknown dtype or reduce op, or no counts");
  }
  return Guarded(comm, "reducescatter",
                 [&] { comm->transport->Reducescatter(sendbuf, recvbuf, recvcounts, dtype, op); });
}

int Barrier(hvd_comm* comm) {
  return Guarded(comm, "barrier", [&] { comm->transport->Barrier(); });
}

}  // namespace hvd_gloo
