// broadcast, allgatherv and alltoallv: data moved as bytes (ncclUint8), whatever the dtype.
//
// NCCL has no ragged allgather or alltoall: those are grouped ncclSend/ncclRecv, one pair per peer
// with data (zero-byte messages are skipped on both sides alike, since every member passes the
// same counts), and the member's own block is a device-to-device copy on the same stream.
// Allgathers whose blocks are all the same size use ncclAllGather, NCCL's own algorithms.
#include <vector>

#include "collectives.h"
#include "dtypes.h"
#include "errors.h"
#include "queue.h"

namespace hvd_nccl {
namespace {

// Byte offsets of the blocks of `counts` elements, and their total.
size_t Offsets(const hvd_comm* comm, const size_t* counts, hvd_dtype dtype, std::vector<size_t>* offsets) {
  offsets->resize(comm->size);
  size_t total = 0;
  for (int32_t i = 0; i < comm->size; ++i) {
    (*offsets)[i] = total;
    total += Bytes(dtype, counts[i]);
  }
  return total;
}

// The member's own block, copied on the stream ahead of the group's transfers.
int CopyOwnBlock(hvd_comm* comm, const char* op, void* dst, const void* src, size_t bytes) {
  if (!bytes) return HVD_OK;
  int rc = comm->device->memcpy_async(dst, src, bytes, HVD_COPY_DEVICE_TO_DEVICE, comm->stream);
  return rc ? DeviceFailed(comm, op, "memcpy_async", rc) : HVD_OK;
}

// One ncclSend of `send_bytes[p]` from `send + send_offsets[p]` and one ncclRecv of
// `recv_bytes[p]` into `recv + recv_offsets[p]` per peer p with data, in one group.
ncclResult_t Exchange(hvd_comm* comm, const char** call, const char* send, const std::vector<size_t>& send_offsets,
                      const std::vector<size_t>& send_bytes, char* recv, const std::vector<size_t>& recv_offsets,
                      const std::vector<size_t>& recv_bytes) {
  const NcclApi* nccl = comm->nccl;
  return Grouped(nccl, call, [&] {
    for (int32_t p = 0; p < comm->size; ++p) {
      if (p == comm->rank) continue;
      if (send_bytes[p]) {
        ncclResult_t r = nccl->Send(send + send_offsets[p], send_bytes[p], ncclUint8, p, comm->nccl_comm, comm->stream);
        if (r != ncclSuccess && r != ncclInProgress) return *call = "ncclSend", r;
      }
      if (recv_bytes[p]) {
        ncclResult_t r = nccl->Recv(recv + recv_offsets[p], recv_bytes[p], ncclUint8, p, comm->nccl_comm, comm->stream);
        if (r != ncclSuccess && r != ncclInProgress) return *call = "ncclRecv", r;
      }
    }
    return ncclSuccess;
  });
}

// HVD_OK for a dtype of the ABI; data is moved as bytes, so an unknown one would move nothing.
int CheckDtype(hvd_comm* comm, const char* op, hvd_dtype dtype) {
  if (Bytes(dtype, 1) != 0) return HVD_OK;
  return Fail(comm, HVD_ERR_INVALID_ARGUMENT, Prefix(comm, op) + "unknown dtype " + std::to_string((int)dtype));
}

std::vector<size_t> BlockBytes(const hvd_comm* comm, const size_t* counts, hvd_dtype dtype) {
  std::vector<size_t> bytes(comm->size);
  for (int32_t i = 0; i < comm->size; ++i) bytes[i] = Bytes(dtype, counts[i]);
  return bytes;
}

}  // namespace

int Broadcast(hvd_comm* comm, void* buf, size_t count, hvd_dtype dtype, int32_t root) {
  if (int status = CheckDtype(comm, "broadcast", dtype)) return status;
  if (root < 0 || root >= comm->size) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                Prefix(comm, "broadcast") + "root " + std::to_string(root) + " is not a member of " +
                    std::to_string(comm->size));
  }
  const size_t bytes = Bytes(dtype, count);
  if (bytes == 0) return Failed(comm);
  if (int status = Begin(comm, "broadcast")) return status;
  ncclResult_t rc = comm->nccl->Broadcast(buf, buf, bytes, ncclUint8, root, comm->nccl_comm, comm->stream);
  return Finish(comm, "broadcast", "ncclBroadcast", rc, bytes);
}

int Allgatherv(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype) {
  if (int status = CheckDtype(comm, "allgather", dtype)) return status;
  std::vector<size_t> offsets;
  const size_t total = Offsets(comm, recvcounts, dtype, &offsets);
  if (total == 0) return Failed(comm);
  if (int status = Begin(comm, "allgather")) return status;
  const std::vector<size_t> bytes = BlockBytes(comm, recvcounts, dtype);
  bool even = true;
  for (size_t b : bytes) even = even && b == bytes[0];
  if (even) {
    ncclResult_t rc = comm->nccl->AllGather(sendbuf, recvbuf, bytes[0], ncclUint8, comm->nccl_comm, comm->stream);
    return Finish(comm, "allgather", "ncclAllGather", rc, total);
  }
  char* recv = static_cast<char*>(recvbuf);
  if (int status = CopyOwnBlock(comm, "allgather", recv + offsets[comm->rank], sendbuf, bytes[comm->rank]))
    return status;
  // Every peer gets this member's whole block, from the start of sendbuf.
  const std::vector<size_t> send_offsets(comm->size, 0), send_bytes(comm->size, bytes[comm->rank]);
  const char* call = "ncclGroupEnd";
  ncclResult_t rc =
      Exchange(comm, &call, static_cast<const char*>(sendbuf), send_offsets, send_bytes, recv, offsets, bytes);
  return Finish(comm, "allgather", call, rc, total);
}

int Alltoallv(hvd_comm* comm, const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
              hvd_dtype dtype) {
  if (int status = CheckDtype(comm, "alltoall", dtype)) return status;
  if (sendcounts[comm->rank] != recvcounts[comm->rank]) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                Prefix(comm, "alltoall") + "sends itself " + std::to_string(sendcounts[comm->rank]) +
                    " elements but expects " + std::to_string(recvcounts[comm->rank]));
  }
  std::vector<size_t> send_offsets, recv_offsets;
  const size_t sent = Offsets(comm, sendcounts, dtype, &send_offsets);
  const size_t received = Offsets(comm, recvcounts, dtype, &recv_offsets);
  // Members skip alike only when no member moves anything; one with data to move makes everyone
  // take part (each sees the counts of its own row and column only).
  if (int status = Begin(comm, "alltoall")) return status;
  const char* send = static_cast<const char*>(sendbuf);
  char* recv = static_cast<char*>(recvbuf);
  const std::vector<size_t> send_bytes = BlockBytes(comm, sendcounts, dtype);
  const std::vector<size_t> recv_bytes = BlockBytes(comm, recvcounts, dtype);
  if (int status = CopyOwnBlock(comm, "alltoall", recv + recv_offsets[comm->rank], send + send_offsets[comm->rank],
                                send_bytes[comm->rank])) {
    return status;
  }
  const char* call = "ncclGroupEnd";
  ncclResult_t rc = Exchange(comm, &call, send, send_offsets, send_bytes, recv, recv_offsets, recv_bytes);
  return Finish(comm, "alltoall", call, rc, sent + received);
}

}  // namespace hvd_nccl
