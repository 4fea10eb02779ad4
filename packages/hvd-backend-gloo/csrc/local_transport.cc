// The transport of a communicator of one member: every collective is a copy of this member's own
// data, and a barrier waits for no one.
#include <cstring>

#include "common/buffer_list.h"
#include "horovod/hvd_reduce.hpp"
#include "transport.h"

namespace hvd_gloo {
namespace {

class LocalTransport final : public Transport {
 public:
  const char* name() const override { return "local"; }

  void Allreduce(const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op) override {
    if (sendbuf != recvbuf) std::memcpy(recvbuf, sendbuf, count * hvd::dtype_size(dtype));
  }

  void AllreduceBuffers(const hvd_common::BufferList& buffers, hvd_dtype dtype, hvd_reduce_op,
                        double postscale) override {
    buffers.ForEachRun(0, buffers.count(), [&](const uint8_t* send, uint8_t* recv, size_t, size_t n) {
      if (send != recv) std::memcpy(recv, send, n * buffers.element_size());
    });
    hvd_common::ScaleResults(buffers, dtype, postscale);
  }

  void Allgatherv(const void* sendbuf, void* recvbuf, const size_t* recvcounts, size_t element_size) override {
    if (recvcounts[0]) std::memcpy(recvbuf, sendbuf, recvcounts[0] * element_size);
  }

  void Broadcast(void*, size_t, size_t, int32_t) override {}

  void Alltoallv(const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t*,
                 size_t element_size) override {
    if (sendcounts[0]) std::memcpy(recvbuf, sendbuf, sendcounts[0] * element_size);
  }

  void Reducescatter(const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                     hvd_reduce_op) override {
    if (recvcounts[0]) std::memcpy(recvbuf, sendbuf, recvcounts[0] * hvd::dtype_size(dtype));
  }

  void Barrier() override {}
};

}  // namespace

std::unique_ptr<Transport> MakeLocalTransport() { return std::make_unique<LocalTransport>(); }

}  // namespace hvd_gloo
