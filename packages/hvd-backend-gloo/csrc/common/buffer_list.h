// The buffers of a multi-buffer allreduce (hvd_backend_ext_v1::allreduce_buffers) seen as one
// array of elements: the fused tensors of an engine cycle, each still where its caller keeps it.
// Shared by every transport; depends on hvd-core's headers only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "horovod/hvd_backend.h"
#include "horovod/hvd_reduce.hpp"

namespace hvd_common {

class BufferList {
 public:
  BufferList(const hvd_buffer_pair* buffers, size_t n, size_t element_size)
      : buffers_(buffers), n_(n), element_(element_size), start_(n + 1, 0) {
    for (size_t i = 0; i < n; ++i) start_[i + 1] = start_[i] + buffers[i].count;
  }

  size_t count() const { return start_[n_]; }  // elements in all
  size_t element_size() const { return element_; }
  size_t size() const { return n_; }  // buffers
  const hvd_buffer_pair& pair(size_t i) const { return buffers_[i]; }

  // Calls fn(send, recv, element_index, count) for each run of elements [first, last) that lies
  // in one buffer, in order; element_index is the run's first element in the whole array.
  template <typename Fn>
  void ForEachRun(size_t first, size_t last, Fn&& fn) const {
    if (first >= last) return;
    // The buffer holding element `first`: the last one starting at or before it (empty buffers
    // start where the next one does, and are skipped).
    size_t i = std::upper_bound(start_.begin(), start_.end(), first) - start_.begin() - 1;
    for (size_t at = first; at < last; ++i) {
      const size_t end = std::min(last, start_[i + 1]);
      if (end <= at) continue;
      const size_t skip = (at - start_[i]) * element_;
      fn(static_cast<const uint8_t*>(buffers_[i].sendbuf) + skip, static_cast<uint8_t*>(buffers_[i].recvbuf) + skip, at,
         end - at);
      at = end;
    }
  }

  // Copies the send side of elements [first, last) to `out`, packed.
  void Gather(size_t first, size_t last, uint8_t* out) const {
    ForEachRun(first, last, [&](const uint8_t* send, uint8_t*, size_t at, size_t n) {
      std::memcpy(out + (at - first) * element_, send, n * element_);
    });
  }

  // Copies packed elements [first, last) from `in` to the receive side.
  void Scatter(const uint8_t* in, size_t first, size_t last) const {
    ForEachRun(first, last, [&](const uint8_t*, uint8_t* recv, size_t at, size_t n) {
      std::memcpy(recv, in + (at - first) * element_, n * element_);
    });
  }

 private:
  const hvd_buffer_pair* buffers_;
  size_t n_;
  size_t element_;
  std::vector<size_t> start_;  // element index where each buffer starts; start_[n_] is the total
};

// Multiplies every result (the receive side) by `factor`, when it is not 1.
inline void ScaleResults(const BufferList& buffers, hvd_dtype dtype, double factor) {
  if (factor == 1.0) return;
  buffers.ForEachRun(0, buffers.count(),
                     [&](const uint8_t*, uint8_t* recv, size_t, size_t n) { hvd::scale(dtype, recv, n, factor); });
}

}  // namespace hvd_common
