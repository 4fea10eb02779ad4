#include "core/output_buffer.h"

#include <cstdint>
#include <new>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace hvdcore {

Buffer::Buffer(size_t bytes, std::shared_ptr<OutputPool> pool) : bytes_(bytes) {
#if defined(MADV_HUGEPAGE)
  if (bytes >= kOwnMappingBytes) {
    if (bytes > SIZE_MAX - 2 * kHugePage) throw std::bad_alloc();  // the sizes below would wrap
    // One huge page more than needed, so that an aligned start leaves room for whole huge pages.
    const size_t whole = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    mapped_ = whole + kHugePage;
    pool_ = std::move(pool);  // only a mapping goes back to it
    void* p = pool_ ? pool_->Take(mapped_) : nullptr;
    const bool fresh = p == nullptr;
    if (fresh) p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    mapping_ = p;
    const uintptr_t start = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage;
    data_ = reinterpret_cast<uint8_t*>(start);
    if (fresh) AdviseHugePages(data_, whole);  // a kept mapping was advised when it was made
    return;
  }
#endif
  data_ = new uint8_t[bytes ? bytes : 1];
}

Buffer::~Buffer() {
#if defined(MADV_HUGEPAGE)
  if (mapping_) {
    if (pool_) {
      pool_->Return(mapping_, mapped_);
    } else {
      munmap(mapping_, mapped_);
    }
    return;
  }
#endif
  delete[] data_;
}

size_t AdviseHugePages(void* data, size_t bytes) {
#if defined(MADV_HUGEPAGE)
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  if (bytes < Buffer::kHugePage || begin > UINTPTR_MAX - bytes) return 0;
  // Only whole huge pages: advice on a partial one would split the mapping for nothing.
  const uintptr_t first = (begin + Buffer::kHugePage - 1) / Buffer::kHugePage * Buffer::kHugePage;
  const uintptr_t last = (begin + bytes) / Buffer::kHugePage * Buffer::kHugePage;
  if (last <= first) return 0;
  if (madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE) != 0) return 0;
  return last - first;
#else
  (void)data;
  (void)bytes;
  return 0;
#endif
}

size_t AdviseCallerOutput(void* data, size_t bytes) {
  return bytes >= kOwnMappingBytes ? AdviseHugePages(data, bytes) : 0;
}

}  // namespace hvdcore
