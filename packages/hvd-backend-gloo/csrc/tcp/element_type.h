// Gloo's option setters are templates on the element type, used only for its size.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hvd_gloo {

// Calls fn(T{}) with the unsigned integer type of `element_size` bytes (1, 2, 4 or 8).
template <typename Fn>
void WithElementType(size_t element_size, Fn&& fn) {
  switch (element_size) {
    case 1: fn(uint8_t{}); break;
    case 2: fn(uint16_t{}); break;
    case 4: fn(uint32_t{}); break;
    default: fn(uint64_t{}); break;
  }
}

}  // namespace hvd_gloo
