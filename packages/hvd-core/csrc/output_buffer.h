// Memory for an engine-allocated output (allgather, alltoall, reducescatter): its size is known only
// after negotiation, and the caller's framework takes it over (DLPack) and frees it with the tensor.
//
// A large output is mapped in huge pages where the kernel gives them on request
// (transparent_hugepage=madvise, a common default). A fresh 64 MiB buffer otherwise takes 16,384
// page faults as the collective first writes it, and on a virtual machine those cost more than the
// copies: allocating and filling 64 MiB took 44 ms here, against 11 ms in huge pages and 6 ms to
// fill memory already mapped. Small outputs come from the heap, which reuses memory.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hvdcore {

class Buffer {
 public:
  // Throws std::bad_alloc when the memory cannot be had.
  explicit Buffer(size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t bytes() const { return bytes_; }

  // Outputs at least this large are mapped; their start is aligned to it, as huge pages need.
  static constexpr size_t kHugePage = size_t{2} << 20;

 private:
  size_t bytes_;
  uint8_t* data_ = nullptr;
  void* mapping_ = nullptr;  // the whole mapping, of mapped_ bytes, when not from the heap
  size_t mapped_ = 0;
};

}  // namespace hvdcore
