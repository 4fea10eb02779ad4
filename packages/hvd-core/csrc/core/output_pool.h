// Freed mappings of large outputs, kept for the next output of the same size.
//
// An allgather, alltoall or reducescatter returns a new tensor every call (Horovod's API), and a
// training step asks for the same sizes again and again. A large output is a fresh mapping
// (output_buffer.h), and its first write faults in every page. Where the hypervisor takes freed
// memory back, as on the machine these figures come from, the faults cost more than the collective:
// filling a fresh 512 MiB mapping in huge pages took 2 s when its memory had gone back, 65 to 94 ms
// when it had not, and a 256 MiB allgather between two hosts (512 MiB out) took 2.5 s per call
// against 0.45 s with its output's mapping kept. A freed output's mapping, kept here, is already
// faulted in; the next output of its size takes it over and costs no fault.
//
// What is kept is bounded (HOROVOD_OUTPUT_POOL_BYTES): a mapping that would exceed the bound pushes
// out the oldest ones, and one larger than the bound is unmapped at once. The engine owns the pool;
// outputs hold a reference to it (they may outlive the engine), and Close() at shutdown unmaps what
// is kept and makes every later return an unmap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>

namespace hvdcore {

class OutputPool {
 public:
  explicit OutputPool(size_t bound_bytes) : bound_(bound_bytes) {}
  ~OutputPool() { Close(); }
  OutputPool(const OutputPool&) = delete;
  OutputPool& operator=(const OutputPool&) = delete;

  // A kept mapping of exactly `bytes`, now the caller's; null when none is kept.
  void* Take(size_t bytes);
  // Keeps the caller's mapping of `bytes` for a later Take, or unmaps it where the bound leaves no
  // room for it.
  void Return(void* mapping, size_t bytes);
  // Unmaps every kept mapping; from now on Return unmaps.
  void Close();

  size_t kept_bytes() const;
  uint64_t reused() const;  // outputs that took a kept mapping

 private:
  struct Mapping {
    void* at;
    size_t bytes;
  };
  mutable std::mutex mu_;
  size_t bound_;
  std::deque<Mapping> kept_;  // oldest first
  size_t kept_bytes_ = 0;
  uint64_t reused_ = 0;
};

}  // namespace hvdcore
