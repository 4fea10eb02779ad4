// The collectives, each one MPI call (or a few, for buffers beyond MPI's int counts) on the
// process set's own communicator.
#include <string>

#include "comm.h"
#include "counts.h"
#include "datatypes.h"
#include "errors.h"
#include "horovod/hvd_reduce.hpp"

namespace hvd_mpi {
namespace {

int CheckDtype(hvd_comm* comm, const char* op, hvd_dtype dtype, MPI_Datatype* type) {
  *type = DatatypeOf(dtype);
  if (*type != MPI_DATATYPE_NULL) return HVD_OK;
  return Fail(comm, HVD_ERR_INVALID_ARGUMENT, Prefix(comm, op) + "unknown dtype " + std::to_string((int)dtype));
}

int CheckReduction(hvd_comm* comm, const char* op, hvd_dtype dtype, hvd_reduce_op reduce, MPI_Datatype* type,
                   MPI_Op* mpi_op) {
  int status = CheckDtype(comm, op, dtype, type);
  if (status != HVD_OK) return status;
  *mpi_op = OpOf(dtype, reduce);
  if (*mpi_op != MPI_OP_NULL) return HVD_OK;
  return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
              Prefix(comm, op) + "no reduction " + std::to_string((int)reduce) + " for " + hvd::dtype_name(dtype));
}

int CheckCounts(hvd_comm* comm, const char* op, const size_t* counts, std::vector<int>* ints,
                std::vector<int>* displs) {
  std::string why;
  if (ToIntCounts(counts, comm->size, ints, displs, &why)) return HVD_OK;
  return Fail(comm, HVD_ERR_UNSUPPORTED, Prefix(comm, op) + why);
}

const char* At(const void* buf, size_t first, size_t width) { return static_cast<const char*>(buf) + first * width; }
char* At(void* buf, size_t first, size_t width) { return static_cast<char*>(buf) + first * width; }

}  // namespace

int Allreduce(hvd_comm* comm, const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op) {
  MPI_Datatype type;
  MPI_Op mpi_op;
  int status = CheckReduction(comm, "allreduce", dtype, op, &type, &mpi_op);
  if (status != HVD_OK) return status;
  size_t width = hvd::dtype_size(dtype);
  bool in_place = sendbuf == recvbuf;
  return ForEachChunk(count, [&](size_t first, int n) {
    const void* send = in_place ? MPI_IN_PLACE : At(sendbuf, first, width);
    return Check(comm, "allreduce", "MPI_Allreduce",
                 MPI_Allreduce(send, At(recvbuf, first, width), n, type, mpi_op, comm->comm));
  });
}

int Allgatherv(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype) {
  MPI_Datatype type;
  int status = CheckDtype(comm, "allgatherv", dtype, &type);
  if (status == HVD_OK) status = CheckCounts(comm, "allgatherv", recvcounts, &comm->recv_counts, &comm->recv_displs);
  if (status != HVD_OK) return status;
  return Check(comm, "allgatherv", "MPI_Allgatherv",
               MPI_Allgatherv(sendbuf, comm->recv_counts[comm->rank], type, recvbuf, comm->recv_counts.data(),
                              comm->recv_displs.data(), type, comm->comm));
}

int Broadcast(hvd_comm* comm, void* buf, size_t count, hvd_dtype dtype, int32_t root) {
  MPI_Datatype type;
  int status = CheckDtype(comm, "broadcast", dtype, &type);
  if (status != HVD_OK) return status;
  if (root < 0 || root >= comm->size) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                Prefix(comm, "broadcast") + "root " + std::to_string(root) + " is out of range for " +
                    std::to_string(comm->size) + " members");
  }
  size_t width = hvd::dtype_size(dtype);
  return ForEachChunk(count, [&](size_t first, int n) {
    return Check(comm, "broadcast", "MPI_Bcast", MPI_Bcast(At(buf, first, width), n, type, root, comm->comm));
  });
}

int Alltoallv(hvd_comm* comm, const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
              hvd_dtype dtype) {
  MPI_Datatype type;
  int status = CheckDtype(comm, "alltoallv", dtype, &type);
  if (status == HVD_OK) status = CheckCounts(comm, "alltoallv", sendcounts, &comm->send_counts, &comm->send_displs);
  if (status == HVD_OK) status = CheckCounts(comm, "alltoallv", recvcounts, &comm->recv_counts, &comm->recv_displs);
  if (status != HVD_OK) return status;
  return Check(comm, "alltoallv", "MPI_Alltoallv",
               MPI_Alltoallv(sendbuf, comm->send_counts.data(), comm->send_displs.data(), type, recvbuf,
                             comm->recv_counts.data(), comm->recv_displs.data(), type, comm->comm));
}

int Reducescatter(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                  hvd_reduce_op op) {
  MPI_Datatype type;
  MPI_Op mpi_op;
  int status = CheckReduction(comm, "reducescatter", dtype, op, &type, &mpi_op);
  if (status == HVD_OK) status = CheckCounts(comm, "reducescatter", recvcounts, &comm->recv_counts, &comm->recv_displs);
  if (status != HVD_OK) return status;
  return Check(comm, "reducescatter", "MPI_Reduce_scatter",
               MPI_Reduce_scatter(sendbuf, recvbuf, comm->recv_counts.data(), type, mpi_op, comm->comm));
}

int Barrier(hvd_comm* comm) { return Check(comm, "barrier", "MPI_Barrier", MPI_Barrier(comm->comm)); }

}  // namespace hvd_mpi
