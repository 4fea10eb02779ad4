// Small helpers shared by the collectives of every transport: dtypes and element counts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "horovod/hvd_reduce.hpp"

namespace hvd_common {

inline bool KnownDtype(hvd_dtype dtype) { return hvd::dtype_size(dtype) != 0; }

inline size_t Sum(const size_t* counts, int32_t n) {
  size_t total = 0;
  for (int32_t i = 0; i < n; ++i) total += counts[i];
  return total;
}

}  // namespace hvd_common
