// Loading a backend library through the C ABI, and the communicator wrapper the engine uses.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/common.h"
#include "horovod/hvd_backend.h"

namespace hvdcore {

class Backend {
 public:
  // Opens `path` RTLD_LOCAL (a backend's symbols must never leak into the process: Debian's
  // libgloo and torch's bundled gloo share hundreds of symbol names) and validates its table.
  static Status Load(const std::string& path, std::shared_ptr<Backend>* out);

  const hvd_backend_v1* api() const { return api_; }
  // Whether the backend reduces several buffers, scaled, in one call (hvd_backend_ext_v1).
  bool has_allreduce_buffers() const { return allreduce_buffers_ != nullptr; }
  // Whether the backend sends eager messages (hvd_backend_ext_v1's eager_* functions).
  bool has_eager() const { return eager_.open != nullptr; }
  bool has_eager_receive_into() const { return eager_.receive_into != nullptr; }
  // Whether the backend's device communicators report failures of queued work (hvd_backend_ext_v1's
  // async_error and abort).
  bool has_async_errors() const { return async_error_ != nullptr; }
  // HVD_DEVICE_* bits of the tensors it takes.
  uint32_t device_kinds() const { return api_->device_kinds; }
  const std::string& path() const { return path_; }
  std::string name() const { return api_->name ? api_->name : "?"; }

 private:
  friend class Comm;
  const hvd_backend_v1* api_ = nullptr;
  decltype(hvd_backend_ext_v1::allreduce_buffers) allreduce_buffers_ = nullptr;
  struct Eager {
    decltype(hvd_backend_ext_v1::eager_open) open = nullptr;
    decltype(hvd_backend_ext_v1::eager_send) send = nullptr;
    decltype(hvd_backend_ext_v1::eager_wait_sent) wait_sent = nullptr;
    decltype(hvd_backend_ext_v1::eager_receive) receive = nullptr;
    decltype(hvd_backend_ext_v1::eager_release) release = nullptr;
    decltype(hvd_backend_ext_v1::eager_receive_into) receive_into = nullptr;  // optional
  } eager_;
  decltype(hvd_backend_ext_v1::async_error) async_error_ = nullptr;
  decltype(hvd_backend_ext_v1::abort) abort_ = nullptr;
  std::string path_;
};

// One communicator of a backend, for one process set. Turns return codes into Status.
class Comm {
 public:
  Comm(std::shared_ptr<Backend> backend, hvd_comm* handle, int32_t rank, int32_t size)
      : backend_(std::move(backend)), handle_(handle), rank_(rank), size_(size) {}
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  static Status Create(std::shared_ptr<Backend> backend, const hvd_comm_config_v1& config, const hvd_store_v1* store,
                       std::unique_ptr<Comm>* out);

  int32_t rank() const { return rank_; }
  int32_t size() const { return size_; }
  const Backend& backend() const { return *backend_; }

  Status Allreduce(const void* send, void* recv, size_t count, hvd_dtype dtype, hvd_reduce_op op);
  // Only where backend().has_allreduce_buffers(). Sets *declined, and does nothing else, where the
  // backend leaves this call to the engine (HVD_ERR_UNSUPPORTED, on every member alike).
  Status AllreduceBuffers(const std::vector<hvd_buffer_pair>& buffers, hvd_dtype dtype, hvd_reduce_op op,
                          double postscale, bool* declined);
  Status Allgatherv(const void* send, void* recv, const std::vector<size_t>& counts, hvd_dtype dtype);
  Status Broadcast(void* buf, size_t count, hvd_dtype dtype, int32_t root);
  Status Alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                   const std::vector<size_t>& recv_counts, hvd_dtype dtype);
  Status Reducescatter(const void* send, void* recv, const std::vector<size_t>& counts, hvd_dtype dtype,
                       hvd_reduce_op op);
  Status Barrier();
  // Whether the last call above failed with HVD_ERR_UNSUPPORTED: the backend did nothing, and
  // leaves the operation to the engine (on every member alike).
  bool declined() const { return declined_; }

  // A device communicator's failure found since its work was queued (OK while none, or where the
  // backend does not report them), and the abort that drains its stream (hvd_backend_ext_v1).
  Status AsyncError() const;
  void Abort();

  // Eager messages (hvd_backend_ext_v1 says what each does), only where backend().has_eager().
  // EagerOpen sets *opened to false, and does nothing else, where the backend has no use for them
  // on this communicator (on every member alike).
  Status EagerOpen(const std::vector<size_t>& bytes, bool* opened);
  Status EagerSend(int32_t channel, int32_t peer, const void* buf, size_t bytes);
  Status EagerWaitSent(int32_t channel, int32_t peer);
  Status EagerReceive(int32_t channel, int32_t peer, const void** data);
  // Only where backend().has_eager_receive_into(): the oldest message from `peer` (exactly `bytes`
  // long) straight into `dst`, and released.
  Status EagerReceiveInto(int32_t channel, int32_t peer, void* dst, size_t bytes);
  Status EagerRelease(int32_t channel, int32_t peer);

 private:
  Status Check(int rc, const char* what) const;
  std::shared_ptr<Backend> backend_;
  hvd_comm* handle_;
  int32_t rank_, size_;
  mutable bool declined_ = false;
};

}  // namespace hvdcore
