// Point-to-point send and receive (HVD_CAP_SEND_RECV) on Gloo's unbound buffers, whichever
// transport carries the communicator's collectives.
//
// Gloo's TCP transport sends an unbound buffer only once the peer has posted the matching
// receive, so send() returns when the peer has received (like MPI_Ssend): two members that both
// send to each other before receiving wait for each other until the timeout.
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "comm.h"
#include "errors.h"

namespace hvd_gloo {
namespace {

constexpr uint8_t kPointToPointSlotPrefix = 0x43;  // the tag is the rest of the slot

int CheckPeer(hvd_comm* comm, const char* op, int32_t peer) {
  if (peer >= 0 && peer < comm->size && peer != comm->rank) return HVD_OK;
  return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
              "gloo " + std::string(op) + " (" + Describe(comm) + "): peer " + std::to_string(peer) +
                  " is not another member of this communicator");
}

}  // namespace

int Send(hvd_comm* comm, const void* buf, size_t bytes, int32_t peer, int32_t tag) {
  if (int rc = CheckPeer(comm, "send", peer)) return rc;
  if (bytes == 0) return HVD_OK;  // the receiver, told the same length, posts nothing either
  return Guarded(comm, "send", [&] {
    comm->waiting_on = {peer};
    auto buffer = comm->context->createUnboundBuffer(const_cast<void*>(buf), bytes);
    buffer->send(peer, gloo::Slot::build(kPointToPointSlotPrefix, static_cast<uint32_t>(tag)));
    buffer->waitSend(comm->timeout);
  });
}

int Recv(hvd_comm* comm, void* buf, size_t bytes, int32_t peer, int32_t tag) {
  if (int rc = CheckPeer(comm, "recv", peer)) return rc;
  if (bytes == 0) return HVD_OK;
  return Guarded(comm, "recv", [&] {
    comm->waiting_on = {peer};
    auto buffer = comm->context->createUnboundBuffer(buf, bytes);
    buffer->recv(peer, gloo::Slot::build(kPointToPointSlotPrefix, static_cast<uint32_t>(tag)));
    buffer->waitRecv(comm->timeout);
  });
}

}  // namespace hvd_gloo
