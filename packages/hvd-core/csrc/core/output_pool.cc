#include "core/output_pool.h"

#include <iterator>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace hvdcore {
namespace {

void Unmap(void* at, size_t bytes) {
#if defined(__linux__)
  munmap(at, bytes);
#else
  (void)at;
  (void)bytes;
#endif
}

}  // namespace

void* OutputPool::Take(size_t bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  // Newest first: the likeliest to be in memory still, and the order a step frees and asks again.
  for (auto it = kept_.rbegin(); it != kept_.rend(); ++it) {
    if (it->bytes != bytes) continue;
    void* at = it->at;
    kept_bytes_ -= bytes;
    kept_.erase(std::next(it).base());
    ++reused_;
    return at;
  }
  return nullptr;
}

void OutputPool::Return(void* mapping, size_t bytes) {
  std::deque<Mapping> out;  // unmapped after the lock is released: munmap of GiBs takes a while
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (bytes > bound_) {
      out.push_back({mapping, bytes});
    } else {
      while (kept_bytes_ + bytes > bound_) {
        out.push_back(kept_.front());
        kept_bytes_ -= kept_.front().bytes;
        kept_.pop_front();
      }
      kept_.push_back({mapping, bytes});
      kept_bytes_ += bytes;
    }
  }
  for (const Mapping& m : out) Unmap(m.at, m.bytes);
}

void OutputPool::Close() {
  std::deque<Mapping> out;
  {
    std::lock_guard<std::mutex> lk(mu_);
    bound_ = 0;
    out.swap(kept_);
    kept_bytes_ = 0;
  }
  for (const Mapping& m : out) Unmap(m.at, m.bytes);
}

size_t OutputPool::kept_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return kept_bytes_;
}

uint64_t OutputPool::reused() const {
  std::lock_guard<std::mutex> lk(mu_);
  return reused_;
}

}  // namespace hvdcore
