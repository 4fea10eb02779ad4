// Memory for outputs in huge pages.
//
// A fresh 64 MiB buffer takes 16,384 page faults as the collective first writes it, and on a virtual
// machine those cost more than the copies: allocating and filling 64 MiB took 44 ms here, against
// 11 ms in huge pages and 6 ms to fill memory already mapped. The kernel gives huge pages on request
// where transparent_hugepage=madvise, a common default; with it off, all of this is advice ignored.
//
// - Buffer: an engine-allocated output (allgather, alltoall, reducescatter), whose size is known
//   only after negotiation; the caller's framework takes it over (DLPack) and frees it with the
//   tensor. From kOwnMappingBytes they are mapped in huge pages (malloc would map them afresh each
//   time anyway); smaller ones come from the heap, which reuses the memory a freed output held: a
//   training step asks for the same sizes again and again, and memory already faulted in costs
//   nothing, while a fresh mapping's pages cost more than the copies (here, where the hypervisor
//   takes freed memory back, a fresh 2 MiB output took 4.4 ms to fill against 0.12 ms reused).
//   The mapped ones get the same reuse from the engine's OutputPool (output_pool.h).
// - AdviseCallerOutput: an output the caller has allocated (hvd's frameworks allocate it with
//   empty_like just before submitting an out-of-place allreduce or broadcast), which the collective
//   is about to write for the first time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/output_pool.h"

namespace hvdcore {

class Buffer {
 public:
  // Throws std::bad_alloc when the memory cannot be had. A mapped buffer comes from `pool` when it
  // keeps one of the size, and goes back to it when freed; without a pool it is unmapped.
  explicit Buffer(size_t bytes, std::shared_ptr<OutputPool> pool = nullptr);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t bytes() const { return bytes_; }

  // A huge page; a mapped output's start is aligned to it.
  static constexpr size_t kHugePage = size_t{2} << 20;

 private:
  size_t bytes_;
  uint8_t* data_ = nullptr;
  void* mapping_ = nullptr;  // the whole mapping, of mapped_ bytes, when not from the heap
  size_t mapped_ = 0;
  std::shared_ptr<OutputPool> pool_;  // where a mapping goes when freed; none for heap memory
};

// Asks for huge pages under the whole 2 MiB pages inside [data, data + bytes), for memory about to be
// written for the first time; the pages at its ends stay as they are. Returns the bytes advised: 0
// when the range holds no whole huge page, or the kernel refused the advice (harmless either way).
size_t AdviseHugePages(void* data, size_t bytes);

// From this size glibc's malloc maps every block afresh (its mmap threshold grows up to 32 MiB on
// 64-bit systems and no further), as other common allocators do for large blocks: advice there lands
// on memory that holds nothing else and goes with the tensor. Smaller blocks mostly come from the
// heap, already faulted in, where the advice would gain nothing and stay on memory the allocator
// reuses for anything.
constexpr size_t kOwnMappingBytes = size_t{32} << 20;

// AdviseHugePages for a caller's separate output of at least kOwnMappingBytes; smaller ones are left
// alone. Returns the bytes advised.
size_t AdviseCallerOutput(void* data, size_t bytes);

}  // namespace hvdcore
