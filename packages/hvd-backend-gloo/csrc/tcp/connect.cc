#include "tcp/connect.h"

#include <algorithm>
#include <string>

#include <gloo/rendezvous/context.h>

#include "tcp/device.h"

namespace hvd_gloo {
namespace {

// Gloo describes a TCP device as "tcp, pci=, iface=lo, speed=-1, addr=[127.0.0.1]": keep the
// address and the interface.
std::string Listening(const std::string& device) {
  size_t addr = device.find("addr=");
  if (addr == std::string::npos) return device;
  std::string out = device.substr(addr + 5);
  size_t iface = device.find("iface="), end = device.find(',', iface);
  if (iface != std::string::npos && end != std::string::npos && end > iface + 6) {
    out += " (interface " + device.substr(iface + 6, end - iface - 6) + ")";
  }
  return out;
}

}  // namespace

void ConnectGloo(hvd_comm* comm, StoreAdapter& store) {
  comm->device = CreateTcpDevice();
  comm->device_description = Listening(comm->device->str());
  // Everyone first: Gloo connects its pairs one peer after the other, and a member waiting for
  // a peer that is itself still waiting for a late third member would time out on the wrong
  // peer. Once all have arrived, connecting takes milliseconds.
  store.Arrive();
  auto context = std::make_shared<gloo::rendezvous::Context>(comm->rank, comm->size);
  // Gloo waits up to 5 times its timeout for a pair to connect: a fifth of the time left keeps
  // connection set-up within the communicator's timeout.
  context->setTimeout(std::max(store.Left() / 5, std::chrono::milliseconds(1)));
  context->connectFullMesh(store, comm->device);
  context->setTimeout(comm->timeout);  // what every collective waits at most
  comm->context = std::move(context);
}

}  // namespace hvd_gloo
