// Eager messages on Gloo's TCP pairs (eager.h).
#include "tcp/eager.h"

#include <string>

#include <gloo/types.h>

#include "comm.h"
#include "errors.h"

namespace hvd_gloo {
namespace {

constexpr uint8_t kEagerSlotPrefix = 0x45;  // apart from send/recv's and the exchanges' slots

uint64_t EagerSlot(int32_t channel) { return gloo::Slot::build(kEagerSlotPrefix, (uint32_t)channel); }

// The channel's space, or null with the failure recorded.
EagerSpace* Checked(hvd_comm* comm, const char* op, int32_t channel, int32_t peer) {
  std::string problem;
  if (comm->eager.empty()) {
    problem = "eager messages were not opened";
  } else if (channel < 0 || channel >= (int32_t)comm->eager.size()) {
    problem =
        "channel " + std::to_string(channel) + " was not opened (" + std::to_string(comm->eager.size()) + " were)";
  } else if (peer < 0 || peer >= comm->size || peer == comm->rank) {
    problem = "peer " + std::to_string(peer) + " is not another member of this communicator";
  } else {
    return comm->eager[channel].get();
  }
  Fail(comm, HVD_ERR_INVALID_ARGUMENT, "gloo " + std::string(op) + " (" + Describe(comm) + "): " + problem);
  return nullptr;
}

}  // namespace

int EagerOpen(hvd_comm* comm, const size_t* bytes, int32_t channels) {
  if (comm->size < 2 || !comm->transport->OverNetwork()) return HVD_ERR_UNSUPPORTED;
  std::string problem = !comm->eager.empty() ? "already open" : channels < 1 ? "no channel asked for" : "";
  for (int32_t c = 0; problem.empty() && c < channels; ++c)
    if (bytes[c] == 0) problem = "no space asked for on channel " + std::to_string(c);
  if (!problem.empty()) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT, "gloo eager open (" + Describe(comm) + "): " + problem);
  }
  return Guarded(comm, "eager open", [&] {
    std::vector<std::unique_ptr<EagerSpace>> opened;
    for (int32_t c = 0; c < channels; ++c) {
      auto eager = std::make_unique<EagerSpace>();
      eager->bytes = bytes[c];
      eager->receives.resize(comm->size);
      eager->oldest.assign(comm->size, 0);
      eager->arrived.assign(comm->size, false);
      eager->sends.resize(comm->size);
      for (int32_t p = 0; p < comm->size; ++p) {
        if (p == comm->rank) continue;
        for (EagerSpace::Receive& receive : eager->receives[p]) {
          // Not value-initialised: the pages are only committed once a message lands in them.
          receive.space.reset(new uint8_t[bytes[c]]);
          receive.buffer = comm->context->createUnboundBuffer(receive.space.get(), bytes[c]);
          receive.buffer->recv(p, EagerSlot(c));
        }
      }
      opened.push_back(std::move(eager));
    }
    comm->eager = std::move(opened);
  });
}

int EagerSend(hvd_comm* comm, int32_t channel, int32_t peer, const void* buf, size_t bytes) {
  EagerSpace* eager = Checked(comm, "eager send", channel, peer);
  if (!eager) return HVD_ERR_INVALID_ARGUMENT;
  if (bytes == 0 || bytes > eager->bytes || eager->sends[peer]) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "gloo eager send (" + Describe(comm) + ") to " + RankName(comm, peer) + " on channel " +
                    std::to_string(channel) + ": " + std::to_string(bytes) + " bytes" +
                    (eager->sends[peer] ? " while the last message is still in flight" : "") + " (1 to " +
                    std::to_string(eager->bytes) + " bytes, one message at a time)");
  }
  return Guarded(comm, "eager send", [&] {
    eager->sends[peer] = comm->context->createUnboundBuffer(const_cast<void*>(buf), bytes);
    eager->sends[peer]->send(peer, EagerSlot(channel));
  });
}

int EagerWaitSent(hvd_comm* comm, int32_t channel, int32_t peer) {
  EagerSpace* eager = Checked(comm, "eager send", channel, peer);
  if (!eager) return HVD_ERR_INVALID_ARGUMENT;
  if (!eager->sends[peer]) return HVD_OK;
  return Guarded(comm, "eager send", [&] {
    comm->waiting_on = {peer};
    eager->sends[peer]->waitSend(comm->timeout);
    eager->sends[peer].reset();
  });
}

int EagerReceive(hvd_comm* comm, int32_t channel, int32_t peer, const void** data) {
  EagerSpace* eager = Checked(comm, "eager receive", channel, peer);
  if (!eager) return HVD_ERR_INVALID_ARGUMENT;
  EagerSpace::Receive& receive = eager->receives[peer][eager->oldest[peer]];
  if (!eager->arrived[peer]) {
    int rc = Guarded(comm, "eager receive", [&] {
      comm->waiting_on = {peer};
      if (receive.unposted) std::rethrow_exception(receive.unposted);
      receive.buffer->waitRecv(comm->timeout);
    });
    if (rc != HVD_OK) return rc;
    eager->arrived[peer] = true;
  }
  *data = receive.space.get();
  return HVD_OK;
}

int EagerRelease(hvd_comm* comm, int32_t channel, int32_t peer) {
  EagerSpace* eager = Checked(comm, "eager release", channel, peer);
  if (!eager) return HVD_ERR_INVALID_ARGUMENT;
  if (!eager->arrived[peer]) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "gloo eager release (" + Describe(comm) + "): no message from " + RankName(comm, peer) +
                    " on channel " + std::to_string(channel) + " to release");
  }
  eager->arrived[peer] = false;
  EagerSpace::Receive& receive = eager->receives[peer][eager->oldest[peer]];
  eager->oldest[peer] = (eager->oldest[peer] + 1) % EagerSpace::kPerPeer;  // posted again, it is now the newest
  return Guarded(comm, "eager receive", [&] {
    receive.unposted = nullptr;
    try {
      receive.buffer->recv(peer, EagerSlot(channel));
    } catch (...) {
      receive.unposted = std::current_exception();  // reported by the next receive here (eager.h)
    }
  });
}

void EagerClose(hvd_comm* comm) {
  if (comm->eager.empty()) return;
  for (int32_t p = 0; p < comm->size; ++p)
    if (p != comm->rank) comm->context->getPair(p).reset();
  comm->eager.clear();
}

}  // namespace hvd_gloo
