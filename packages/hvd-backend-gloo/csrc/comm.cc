// Creating and destroying communicators: one Gloo context per communicator, fully connected over
// TCP, with addresses exchanged through the engine's store.
#include "comm.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>

#include <gloo/rendezvous/context.h>

#include "device.h"
#include "errors.h"
#include "shm_group.h"
#include "store_adapter.h"

namespace hvd_gloo {
namespace {

bool IsIdentity(const hvd_comm* comm) {
  for (int32_t r = 0; r < comm->size; ++r)
    if (comm->job_ranks[r] != r) return false;
  return true;
}

int Report(char* error, size_t error_len, int status, const std::string& message) {
  if (error && error_len) std::snprintf(error, error_len, "%s", message.c_str());
  return status;
}

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

std::string RankName(const hvd_comm* comm, int32_t r) {
  return "rank " + std::to_string(r >= 0 && r < comm->size ? comm->job_ranks[r] : r);
}

std::string Describe(const hvd_comm* comm) {
  if (IsIdentity(comm)) return "rank " + std::to_string(comm->rank) + " of " + std::to_string(comm->size);
  std::string ranks;
  for (int32_t r = 0; r < comm->size; ++r) ranks += (r ? ", " : "") + std::to_string(comm->job_ranks[r]);
  return RankName(comm, comm->rank) + ", member " + std::to_string(comm->rank) + " of process set [" + ranks + "]";
}

int CommCreate(const hvd_comm_config_v1* config, const hvd_store_v1* store, hvd_comm** out, char* error,
               size_t error_len) {
  if (!config || !out) return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT, "gloo: comm_create without a config");
  *out = nullptr;
  if (config->struct_size < offsetof(hvd_comm_config_v1, device_id) + sizeof(config->device_id)) {
    return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT, "gloo: truncated hvd_comm_config_v1");
  }
  if (config->size < 1 || config->rank < 0 || config->rank >= config->size) {
    return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT,
                  "gloo: rank " + std::to_string(config->rank) + " is out of range for size " +
                      std::to_string(config->size));
  }
  if (config->device_kind != HVD_DEVICE_CPU) {
    return Report(error, error_len, HVD_ERR_UNSUPPORTED, "gloo: this backend serves CPU (host memory) buffers only");
  }
  if (config->timeout_ms <= 0) {
    return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT, "gloo: the timeout must be positive");
  }
  if (config->size > 1 && (!store || !store->set || !store->get || !store->release || !config->key_prefix)) {
    return Report(error, error_len, HVD_ERR_INVALID_ARGUMENT, "gloo: connecting ranks needs a store and a key prefix");
  }

  auto comm = std::make_unique<hvd_comm>();
  comm->rank = config->rank;
  comm->size = config->size;
  comm->timeout = std::chrono::milliseconds(config->timeout_ms);
  comm->job_ranks.resize(config->size);
  for (int32_t r = 0; r < config->size; ++r) comm->job_ranks[r] = config->job_ranks ? config->job_ranks[r] : r;

  if (comm->size > 1) {  // one member needs no transport: every collective is a local copy
    try {
      comm->device = CreateTcpDevice();
      comm->device_description = Listening(comm->device->str());
      StoreAdapter adapter(store, config->key_prefix, comm.get());
      // Everyone first: Gloo connects its pairs one peer after the other, and a member waiting for
      // a peer that is itself still waiting for a late third member would time out on the wrong
      // peer. Once all have arrived, connecting takes milliseconds.
      adapter.Arrive();
      auto context = std::make_shared<gloo::rendezvous::Context>(comm->rank, comm->size);
      // Gloo waits up to 5 times its timeout for a pair to connect: a fifth of the time left keeps
      // connection set-up within the communicator's timeout.
      context->setTimeout(std::max(adapter.Left() / 5, std::chrono::milliseconds(1)));
      context->connectFullMesh(adapter, comm->device);
      context->setTimeout(comm->timeout);  // what every collective waits at most
      comm->context = std::move(context);
      comm->shm = ShmGroup::Connect(comm.get(), adapter);
    } catch (...) {
      Failure f = CurrentFailure(comm->timeout);
      std::string message = "gloo: could not connect " + Describe(comm.get()) + ": " + f.message;
      if (!comm->device_description.empty()) {
        message += " [this rank listens on " + comm->device_description +
                   "; for a job across hosts, set HOROVOD_GLOO_IFACE to an interface every host can reach]";
      }
      return Report(error, error_len, f.status, message);
    }
  }
  *out = comm.release();
  return HVD_OK;
}

void CommDestroy(hvd_comm* comm) {
  delete comm;  // closes the context's connections, then stops the device's event loop
}

const char* LastError(const hvd_comm* comm) { return comm ? comm->last_error.c_str() : "no communicator"; }

}  // namespace hvd_gloo
