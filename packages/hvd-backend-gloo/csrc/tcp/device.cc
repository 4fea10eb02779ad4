#include "tcp/device.h"

#include <cstdlib>
#include <stdexcept>

#include <gloo/transport/tcp/device.h>

namespace hvd_gloo {

std::shared_ptr<gloo::transport::Device> CreateTcpDevice() {
  gloo::transport::tcp::attr attr;
  const char* iface = std::getenv("HOROVOD_GLOO_IFACE");
  if (iface && *iface) {
    attr.iface = iface;
    try {
      return gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      throw std::runtime_error("HOROVOD_GLOO_IFACE=" + std::string(iface) +
                               " names no usable network interface: " + e.what());
    }
  }
  try {
    return gloo::transport::tcp::CreateDevice(attr);  // empty hostname: Gloo resolves gethostname()
  } catch (const std::exception&) {
    attr.hostname = "127.0.0.1";
    return gloo::transport::tcp::CreateDevice(attr);
  }
}

}  // namespace hvd_gloo
