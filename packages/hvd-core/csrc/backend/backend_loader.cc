#include "backend/backend_loader.h"

#include <dlfcn.h>

#include <cstddef>

namespace hvdcore {

Status Backend::Load(const std::string& path, std::shared_ptr<Backend>* out) {
  // Never dlclose: a backend may own threads and static state that outlive any one engine.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    return Status::InvalidArgument("could not load backend library '" + path + "': " + (err ? err : "unknown error"));
  }
  auto get = reinterpret_cast<hvd_backend_v1_get_fn>(dlsym(lib, HVD_BACKEND_V1_ENTRY));
  if (!get) {
    return Status::InvalidArgument("'" + path + "' is not an hvd backend: it does not export " HVD_BACKEND_V1_ENTRY);
  }
  const hvd_backend_v1* api = get();
  if (!api) return Status::InvalidArgument("backend '" + path + "' returned no function table");
  std::string name = api->name ? api->name : "<unnamed>";
  if (api->abi_version != HVD_BACKEND_ABI_VERSION) {
    return Status::InvalidArgument("backend '" + name + "' (" + path + ") implements backend ABI version " +
                                   std::to_string(api->abi_version) + ", but this hvd-core supports only version " +
                                   std::to_string(HVD_BACKEND_ABI_VERSION) +
                                   "; install a release of the backend package built for this hvd-core");
  }
  if (api->struct_size < sizeof(hvd_backend_v1)) {
    return Status::InvalidArgument("backend '" + name + "' (" + path + ") has a truncated function table (" +
                                   std::to_string(api->struct_size) + " bytes, expected " +
                                   std::to_string(sizeof(hvd_backend_v1)) + ")");
  }
  struct Required {
    const void* fn;
    const char* name;
  } required[] = {
      {(const void*)api->comm_create, "comm_create"}, {(const void*)api->comm_destroy, "comm_destroy"},
      {(const void*)api->last_error, "last_error"},   {(const void*)api->allreduce, "allreduce"},
      {(const void*)api->allgatherv, "allgatherv"},   {(const void*)api->broadcast, "broadcast"},
      {(const void*)api->alltoallv, "alltoallv"},     {(const void*)api->reducescatter, "reducescatter"},
      {(const void*)api->barrier, "barrier"},
  };
  for (const Required& r : required) {
    if (!r.fn) return Status::InvalidArgument("backend '" + name + "' (" + path + ") does not implement " + r.name);
  }
  if ((api->capabilities & HVD_CAP_SEND_RECV) && (!api->send || !api->recv)) {
    return Status::InvalidArgument("backend '" + name + "' claims send/recv but does not implement them");
  }
  auto backend = std::shared_ptr<Backend>(new Backend());
  backend->api_ = api;
  // Optional, and absent from backends built before it: a table too short to hold a member
  // means the member is not there.
  if (auto get_ext = reinterpret_cast<hvd_backend_ext_v1_get_fn>(dlsym(lib, HVD_BACKEND_EXT_V1_ENTRY))) {
    const hvd_backend_ext_v1* ext = get_ext();
    if (ext && ext->struct_size >= offsetof(hvd_backend_ext_v1, allreduce_buffers) + sizeof ext->allreduce_buffers)
      backend->allreduce_buffers_ = ext->allreduce_buffers;
    if (ext && ext->struct_size >= offsetof(hvd_backend_ext_v1, eager_release) + sizeof ext->eager_release) {
      const bool all =
          ext->eager_open && ext->eager_send && ext->eager_wait_sent && ext->eager_receive && ext->eager_release;
      const bool none =
          !ext->eager_open && !ext->eager_send && !ext->eager_wait_sent && !ext->eager_receive && !ext->eager_release;
      if (!all && !none) {
        return Status::InvalidArgument("backend '" + name + "' (" + path +
                                       ") implements some of the eager message functions but not all five");
      }
      if (all) {
        backend->eager_ = {ext->eager_open, ext->eager_send, ext->eager_wait_sent, ext->eager_receive,
                           ext->eager_release};
        if (ext->struct_size >= offsetof(hvd_backend_ext_v1, eager_receive_into) + sizeof ext->eager_receive_into)
          backend->eager_.receive_into = ext->eager_receive_into;
      }
    }
    if (ext && ext->struct_size >= offsetof(hvd_backend_ext_v1, abort) + sizeof ext->abort) {
      if (!ext->async_error != !ext->abort) {
        return Status::InvalidArgument("backend '" + name + "' (" + path +
                                       ") implements one of async_error and abort but not both");
      }
      backend->async_error_ = ext->async_error;
      backend->abort_ = ext->abort;
    }
  }
  backend->path_ = path;
  *out = std::move(backend);
  return Status::Ok();
}

Status Comm::Create(std::shared_ptr<Backend> backend, const hvd_comm_config_v1& config, const hvd_store_v1* store,
                    std::unique_ptr<Comm>* out) {
  char error[1024] = "";
  hvd_comm* handle = nullptr;
  int rc = backend->api()->comm_create(&config, store, &handle, error, sizeof error);
  if (rc != HVD_OK || !handle) {
    return Status::Aborted("backend '" + backend->name() + "' could not create a communicator for " +
                           std::to_string(config.size) + " ranks: " + (error[0] ? error : "no detail given"));
  }
  out->reset(new Comm(std::move(backend), handle, config.rank, config.size));
  return Status::Ok();
}

Comm::~Comm() {
  if (handle_) backend_->api()->comm_destroy(handle_);
}

Status Comm::Check(int rc, const char* what) const {
  declined_ = rc == HVD_ERR_UNSUPPORTED;
  if (rc == HVD_OK) return Status::Ok();
  const char* detail = backend_->api()->last_error(handle_);
  std::string name = backend_->name();
  if (detail && *detail && std::string(detail).rfind(name, 0) == 0) return Status::Aborted(detail);  // self-contained
  return Status::Aborted(name + " " + what + " failed: " + (detail && *detail ? detail : "no detail given"));
}

Status Comm::Allreduce(const void* send, void* recv, size_t count, hvd_dtype dtype, hvd_reduce_op op) {
  return Check(backend_->api()->allreduce(handle_, send, recv, count, dtype, op), "allreduce");
}
Status Comm::AllreduceBuffers(const std::vector<hvd_buffer_pair>& buffers, hvd_dtype dtype, hvd_reduce_op op,
                              double postscale, bool* declined) {
  const int rc = backend_->allreduce_buffers_(handle_, buffers.data(), buffers.size(), dtype, op, postscale);
  *declined = rc == HVD_ERR_UNSUPPORTED;
  return *declined ? Status::Ok() : Check(rc, "allreduce");
}
Status Comm::Allgatherv(const void* send, void* recv, const std::vector<size_t>& counts, hvd_dtype dtype) {
  return Check(backend_->api()->allgatherv(handle_, send, recv, counts.data(), dtype), "allgather");
}
Status Comm::Broadcast(void* buf, size_t count, hvd_dtype dtype, int32_t root) {
  return Check(backend_->api()->broadcast(handle_, buf, count, dtype, root), "broadcast");
}
Status Comm::Alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                       const std::vector<size_t>& recv_counts, hvd_dtype dtype) {
  return Check(backend_->api()->alltoallv(handle_, send, send_counts.data(), recv, recv_counts.data(), dtype),
               "alltoall");
}
Status Comm::Reducescatter(const void* send, void* recv, const std::vector<size_t>& counts, hvd_dtype dtype,
                           hvd_reduce_op op) {
  return Check(backend_->api()->reducescatter(handle_, send, recv, counts.data(), dtype, op), "reducescatter");
}
Status Comm::Barrier() { return Check(backend_->api()->barrier(handle_), "barrier"); }

Status Comm::AsyncError() const {
  if (!backend_->async_error_) return Status::Ok();
  return Check(backend_->async_error_(handle_), "queued work");
}
void Comm::Abort() {
  if (backend_->abort_) backend_->abort_(handle_);
}

Status Comm::EagerOpen(const std::vector<size_t>& bytes, bool* opened) {
  const int rc = backend_->eager_.open(handle_, bytes.data(), (int32_t)bytes.size());
  *opened = rc == HVD_OK;
  return rc == HVD_ERR_UNSUPPORTED ? Status::Ok() : Check(rc, "eager open");
}
Status Comm::EagerSend(int32_t channel, int32_t peer, const void* buf, size_t bytes) {
  return Check(backend_->eager_.send(handle_, channel, peer, buf, bytes), "eager send");
}
Status Comm::EagerWaitSent(int32_t channel, int32_t peer) {
  return Check(backend_->eager_.wait_sent(handle_, channel, peer), "eager send");
}
Status Comm::EagerReceive(int32_t channel, int32_t peer, const void** data) {
  return Check(backend_->eager_.receive(handle_, channel, peer, data), "eager receive");
}
Status Comm::EagerRelease(int32_t channel, int32_t peer) {
  return Check(backend_->eager_.release(handle_, channel, peer), "eager receive");
}
Status Comm::EagerReceiveInto(int32_t channel, int32_t peer, void* dst, size_t bytes) {
  return Check(backend_->eager_.receive_into(handle_, channel, peer, dst, bytes), "eager receive");
}

}  // namespace hvdcore
