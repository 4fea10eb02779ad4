// Creating and destroying communicators: members connected by Gloo over TCP (tcp/connect.h), and
// the one transport that carries their collectives chosen (transport.h).
#include "comm.h"

#include <cstddef>
#include <cstdio>

#include "errors.h"
#include "tcp/connect.h"
#include "tcp/store_adapter.h"

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
    return Report(
        error, error_len, HVD_ERR_INVALID_ARGUMENT,
        "gloo: rank " + std::to_string(config->rank) + " is out of range for size " + std::to_string(config->size));
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

  if (comm->size == 1) {
    comm->transport = MakeLocalTransport();  // needs no connection
  } else {
    try {
      StoreAdapter adapter(store, config->key_prefix, comm.get());
      ConnectGloo(comm.get(), adapter);
      comm->transport = ChooseTransport(comm.get(), adapter);
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
  if (!comm) return;
  // The transport goes first (through shared memory, the peers learn this member has left), then
  // the eager messages' connections, then the context's, then the device's event loop.
  comm->transport.reset();
  EagerClose(comm);
  delete comm;
}

const char* LastError(const hvd_comm* comm) { return comm ? comm->last_error.c_str() : "no communicator"; }

}  // namespace hvd_gloo
