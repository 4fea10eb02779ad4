// The multi-buffer allreduce over TCP (hvd_backend_ext_v1::allreduce_buffers): the engine's fused
// tensors and averages.
//
// Gloo's ring needs one contiguous buffer: the buffers are packed into the transport's staging
// space (as the engine would have done) and the results scaled on the way back out. A single
// buffer needs no packing.
#include "common/buffer_list.h"
#include "tcp/tcp_transport.h"

namespace hvd_gloo {

void TcpTransport::AllreduceBuffers(const hvd_common::BufferList& buffers, hvd_dtype dtype, hvd_reduce_op op,
                                    double postscale) {
  const size_t count = buffers.count(), element = buffers.element_size();
  if (buffers.size() == 1) {
    const hvd_buffer_pair& only = buffers.pair(0);
    Allreduce(only.sendbuf, only.recvbuf, only.count, dtype, op);
  } else {
    if (packed_.size() < count * element) packed_.resize(count * element);
    buffers.Gather(0, count, packed_.data());
    Allreduce(packed_.data(), packed_.data(), count, dtype, op);
    buffers.Scatter(packed_.data(), 0, count);
  }
  hvd_common::ScaleResults(buffers, dtype, postscale);
}

}  // namespace hvd_gloo
