// Eager messages on Gloo's TCP pairs (eager.h).
#include "tcp/eager.h"

#include <string>

#include <gloo/types.h>

#include "comm.h"
#include "errors.h"

namespace hvd_gloo {
namespace {

constexpr uint8_t kEagerSlotPrefix = 0x45;  // apart from send/recv's and the exchanges' slots

uint64_t EagerSlot() { return gloo::Slot::build(kEagerSlotPrefix, 0); }

int Check(hvd_comm* comm, const char* op, int32_t peer) {
  if (!comm->eager) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "gloo " + std::string(op) + " (" + Describe(comm) + "): eager messages were not opened");
  }
  if (peer >= 0 && peer < comm->size && peer != comm->rank) return HVD_OK;
  return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
              "gloo " + std::string(op) + " (" + Describe(comm) + "): peer " + std::to_string(peer) +
                  " is not another member of this communicator");
}

}  // namespace

int EagerOpen(hvd_comm* comm, size_t bytes) {
  if (comm->size < 2 || !comm->transport->OverNetwork()) return HVD_ERR_UNSUPPORTED;
  if (comm->eager || bytes == 0) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "gloo eager open (" + Describe(comm) +
                    "): " + (bytes == 0 ? std::string("no space asked for") : std::string("already open")));
  }
  return Guarded(comm, "eager open", [&] {
    auto eager = std::make_unique<EagerSpace>();
    eager->bytes = bytes;
    eager->receives.resize(comm->size);
    eager->oldest.assign(comm->size, 0);
    eager->arrived.assign(comm->size, false);
    eager->sends.resize(comm->size);
    for (int32_t p = 0; p < comm->size; ++p) {
      if (p == comm->rank) continue;
      for (EagerSpace::Receive& receive : eager->receives[p]) {
        // Not value-initialised: the pages are only committed once a message lands in them.
        receive.space.reset(new uint8_t[bytes]);
        receive.buffer = comm->context->createUnboundBuffer(receive.space.get(), bytes);
        receive.buffer->recv(p, EagerSlot());
      }
    }
    comm->eager = std::move(eager);
  });
}

int EagerSend(hvd_comm* comm, int32_t peer, const void* buf, size_t bytes) {
  if (int rc = Check(comm, "eager send", peer)) return rc;
  EagerSpace& eager = *comm->eager;
  if (bytes == 0 || bytes > eager.bytes || eager.sends[peer]) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "gloo eager send (" + Describe(comm) + ") to " + RankName(comm, peer) + ": " + std::to_string(bytes) +
                    " bytes" + (eager.sends[peer] ? " while the last message is still in flight" : "") + " (1 to " +
                    std::to_string(eager.bytes) + " bytes, one message at a time)");
  }
  return Guarded(comm, "eager send", [&] {
    eager.sends[peer] = comm->context->createUnboundBuffer(const_cast<void*>(buf), bytes);
    eager.sends[peer]->send(peer, EagerSlot());
  });
}

int EagerWaitSent(hvd_comm* comm, int32_t peer) {
  if (int rc = Check(comm, "eager send", peer)) return rc;
  EagerSpace& eager = *comm->eager;
  if (!eager.sends[peer]) return HVD_OK;
  return Guarded(comm, "eager send", [&] {
    comm->waiting_on = {peer};
    eager.sends[peer]->waitSend(comm->timeout);
    eager.sends[peer].reset();
  });
}

int EagerReceive(hvd_comm* comm, int32_t peer, const void** data) {
  if (int rc = Check(comm, "eager receive", peer)) return rc;
  EagerSpace& eager = *comm->eager;
  EagerSpace::Receive& receive = eager.receives[peer][eager.oldest[peer]];
  if (!eager.arrived[peer]) {
    int rc = Guarded(comm, "eager receive", [&] {
      comm->waiting_on = {peer};
      receive.buffer->waitRecv(comm->timeout);
    });
    if (rc != HVD_OK) return rc;
    eager.arrived[peer] = true;
  }
  *data = receive.space.get();
  return HVD_OK;
}

int EagerRelease(hvd_comm* comm, int32_t peer) {
  if (int rc = Check(comm, "eager release", peer)) return rc;
  EagerSpace& eager = *comm->eager;
  if (!eager.arrived[peer]) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "gloo eager release (" + Describe(comm) + "): no message from " + RankName(comm, peer) + " to release");
  }
  eager.arrived[peer] = false;
  EagerSpace::Receive& receive = eager.receives[peer][eager.oldest[peer]];
  eager.oldest[peer] = (eager.oldest[peer] + 1) % EagerSpace::kPerPeer;  // posted again, it is now the newest
  return Guarded(comm, "eager receive", [&] { receive.buffer->recv(peer, EagerSlot()); });
}

}  // namespace hvd_gloo
