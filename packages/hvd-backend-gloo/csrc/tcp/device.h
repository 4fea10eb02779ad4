// The TCP transport device a communicator's Gloo context runs on.
#pragma once

#include <memory>
#include <string>

#include <gloo/transport/device.h>

namespace hvd_gloo {

// HOROVOD_GLOO_IFACE=<name>: listen on that interface's address (what the launcher sets for
// multi-host jobs). Otherwise the address this host's name resolves to, as Gloo resolves it; when
// the name does not resolve to a usable address, loopback (enough for a job on one host).
// Throws std::runtime_error naming the setting that did not work.
std::shared_ptr<gloo::transport::Device> CreateTcpDevice();

}  // namespace hvd_gloo
