// Point to point: MPI_Send and MPI_Recv of bytes, tagged, on the process set's communicator.
#include <string>

#include "comm.h"
#include "counts.h"
#include "errors.h"

namespace hvd_mpi {
namespace {

int CheckPeerAndTag(hvd_comm* comm, const char* op, int32_t peer, int32_t tag) {
  if (peer < 0 || peer >= comm->size || peer == comm->rank) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                Prefix(comm, op) + "peer " + std::to_string(peer) + " is not another member (of " +
                    std::to_string(comm->size) + ")");
  }
  int* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm->comm, MPI_TAG_UB, &tag_ub, &found);
  int largest = found && tag_ub ? *tag_ub : 32767;  // MPI guarantees at least 32767
  if (tag < 0 || tag > largest) {
    return Fail(
        comm, HVD_ERR_INVALID_ARGUMENT,
        Prefix(comm, op) + "tag " + std::to_string(tag) + " is outside MPI's [0, " + std::to_string(largest) + "]");
  }
  return HVD_OK;
}

}  // namespace

int Send(hvd_comm* comm, const void* buf, size_t bytes, int32_t peer, int32_t tag) {
  int status = CheckPeerAndTag(comm, "send", peer, tag);
  if (status != HVD_OK) return status;
  // An empty message is still sent: the receiver posts a matching receive for it.
  if (bytes == 0) return Check(comm, "send", "MPI_Send", MPI_Send(buf, 0, MPI_BYTE, peer, tag, comm->comm));
  // Messages between two ranks with the same tag arrive in order, so pieces reassemble.
  return ForEachChunk(bytes, [&](size_t first, int n) {
    return Check(comm, "send", "MPI_Send",
                 MPI_Send(static_cast<const char*>(buf) + first, n, MPI_BYTE, peer, tag, comm->comm));
  });
}

int Recv(hvd_comm* comm, void* buf, size_t bytes, int32_t peer, int32_t tag) {
  int status = CheckPeerAndTag(comm, "recv", peer, tag);
  if (status != HVD_OK) return status;
  auto receive = [&](size_t first, int n) -> int {
    MPI_Status mpi_status;
    int rc = MPI_Recv(static_cast<char*>(buf) + first, n, MPI_BYTE, peer, tag, comm->comm, &mpi_status);
    if (rc != MPI_SUCCESS) return Check(comm, "recv", "MPI_Recv", rc);
    int got = 0;
    MPI_Get_count(&mpi_status, MPI_BYTE, &got);
    if (got != n) {  // a longer message fails above (MPI_ERR_TRUNCATE); a shorter one is caught here
      return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                  Prefix(comm, "recv") + "expected " + std::to_string(n) + " bytes from member " +
                      std::to_string(peer) + " (tag " + std::to_string(tag) + "), got " + std::to_string(got));
    }
    return HVD_OK;
  };
  if (bytes == 0) return receive(0, 0);
  return ForEachChunk(bytes, receive);
}

}  // namespace hvd_mpi
