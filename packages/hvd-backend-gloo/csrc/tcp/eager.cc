// Eager messages over TCP (eager.h), on the connections of links.h.
#include "tcp/eager.h"

#include <string>
#include <vector>

#include "comm.h"
#include "errors.h"

namespace hvd_gloo {
namespace {

// The links, or null with the failure recorded.
Links* Checked(hvd_comm* comm, const char* op, int32_t channel, int32_t peer) {
  std::string problem;
  if (!comm->eager) {
    problem = "eager messages were not opened";
  } else if (channel < 0 || channel >= comm->eager->channels()) {
    problem =
        "channel " + std::to_string(channel) + " was not opened (" + std::to_string(comm->eager->channels()) + " were)";
  } else if (peer < 0 || peer >= comm->size || peer == comm->rank) {
    problem = "peer " + std::to_string(peer) + " is not another member of this communicator";
  } else {
    return comm->eager.get();
  }
  Fail(comm, HVD_ERR_INVALID_ARGUMENT, "gloo " + std::string(op) + " (" + Describe(comm) + "): " + problem);
  return nullptr;
}

}  // namespace

int EagerOpen(hvd_comm* comm, const size_t* bytes, int32_t channels) {
  if (comm->size < 2 || !comm->transport->OverNetwork()) return HVD_ERR_UNSUPPORTED;
  std::string problem = comm->eager ? "already open" : channels < 1 ? "no channel asked for" : "";
  for (int32_t c = 0; problem.empty() && c < channels; ++c)
    if (bytes[c] == 0) problem = "no space asked for on channel " + std::to_string(c);
  if (!problem.empty()) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT, "gloo eager open (" + Describe(comm) + "): " + problem);
  }
  return Guarded(comm, "eager open",
                 [&] { comm->eager = std::make_unique<Links>(comm, std::vector<size_t>(bytes, bytes + channels)); });
}

int EagerSend(hvd_comm* comm, int32_t channel, int32_t peer, const void* buf, size_t bytes) {
  Links* eager = Checked(comm, "eager send", channel, peer);
  if (!eager) return HVD_ERR_INVALID_ARGUMENT;
  const bool busy = eager->sending(channel, peer);
  if (bytes == 0 || bytes > eager->bytes(channel) || busy) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "gloo eager send (" + Describe(comm) + ") to " + RankName(comm, peer) + " on channel " +
                    std::to_string(channel) + ": " + std::to_string(bytes) + " bytes" +
                    (busy ? " while the last message is still in flight" : "") + " (1 to " +
                    std::to_string(eager->bytes(channel)) + " bytes, one message at a time)");
  }
  return Guarded(comm, "eager send", [&] { eager->Send(channel, peer, buf, bytes); });
}

int EagerWaitSent(hvd_comm* comm, int32_t channel, int32_t peer) {
  Links* eager = Checked(comm, "eager send", channel, peer);
  if (!eager) return HVD_ERR_INVALID_ARGUMENT;
  if (!eager->sending(channel, peer)) return HVD_OK;
  return Guarded(comm, "eager send", [&] {
    comm->waiting_on = {peer};
    eager->WaitSent(channel, peer);
  });
}

int EagerReceive(hvd_comm* comm, int32_t channel, int32_t peer, const void** data) {
  Links* eager = Checked(comm, "eager receive", channel, peer);
  if (!eager) return HVD_ERR_INVALID_ARGUMENT;
  return Guarded(comm, "eager receive", [&] {
    comm->waiting_on = {peer};
    *data = eager->Receive(channel, peer);
  });
}

int EagerRelease(hvd_comm* comm, int32_t channel, int32_t peer) {
  Links* eager = Checked(comm, "eager release", channel, peer);
  if (!eager) return HVD_ERR_INVALID_ARGUMENT;
  if (!eager->holds(channel, peer)) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "gloo eager release (" + Describe(comm) + "): no message from " + RankName(comm, peer) +
                    " on channel " + std::to_string(channel) + " to release");
  }
  eager->Release(channel, peer);
  return HVD_OK;
}

int EagerReceiveInto(hvd_comm* comm, int32_t channel, int32_t peer, void* dst, size_t bytes) {
  Links* eager = Checked(comm, "eager receive", channel, peer);
  if (!eager) return HVD_ERR_INVALID_ARGUMENT;
  const bool held = eager->holds(channel, peer);
  if (held || !dst || bytes == 0 || bytes > eager->bytes(channel)) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "gloo eager receive (" + Describe(comm) + ") from " + RankName(comm, peer) + " on channel " +
                    std::to_string(channel) + ": " +
                    (held ? "a message is still held (received and not released)"
                          : std::to_string(bytes) + " bytes " + (dst ? "" : "to no destination ") + "(1 to " +
                                std::to_string(eager->bytes(channel)) + " bytes into a destination)"));
  }
  return Guarded(comm, "eager receive", [&] {
    comm->waiting_on = {peer};
    eager->ReceiveInto(channel, peer, dst, bytes);
  });
}

void EagerClose(hvd_comm* comm) { comm->eager.reset(); }

}  // namespace hvd_gloo
