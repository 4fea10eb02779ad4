// Small helpers shared by the collectives: element sizes and Gloo's typed buffer setters.
#pragma once

#include <cstddef>
#include <cstdint>

#include "horovod/hvd_reduce.hpp"

namespace hvd_gloo {

// Gloo's option setters are templates on the element type, used only for its size: calls
// fn(T{}) with the unsigned integer type of `element_size` bytes (1, 2, 4 or 8).
template <typename Fn>
void WithElementType(size_t element_size, Fn&& fn) {
  switch (element_size) {
    case 1: fn(uint8_t{}); break;
    case 2: fn(uint16_t{}); break;
    case 4: fn(uint32_t{}); break;
    default: fn(uint64_t{}); break;
  }
}

inline bool KnownDtype(hvd_dtype dtype) { return hvd::dtype_size(dtype) != 0; }

inline size_t Sum(const size_t* counts, int32_t n) {
  size_t total = 0;
  for (int32_t i = 0; i < n; ++i) total += counts[i];
  return total;
}

}  // namespace hvd_gloo
