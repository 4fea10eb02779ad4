// How much inline space a process set's negotiation records carry, cycle by cycle.
//
// Every record carries HOROVOD_NEGOTIATION_INLINE_BYTES of it (1 KiB by default): enough for small
// cached allreduces and broadcasts to complete inside negotiation, in one network round. An op a
// little larger (a 4 KiB to 64 KiB broadcast, allgather or alltoall) would pay a second round for its
// data, and over TCP a round is most of such an op's time. A larger space on every record would
// cost every cycle, idle ones and jobs without small ops included. So the space grows to what the
// ready cached ops of the last cycles needed, by at most a share of
// HOROVOD_NEGOTIATION_INLINE_MAX_BYTES (the bound over all the members' records together, 128 KiB
// by default), and shrinks back once a window of cycles has needed less.
//
// Every member observes the same figures (what was ready is read from the gathered records, sizes
// from the cache every member shares), so every member's records keep the same size without a
// word exchanged about it.
#pragma once

#include <algorithm>
#include <cstddef>

namespace hvdcore {

class InlineSpace {
 public:
  // The inline space of this member's next record.
  size_t Bytes(size_t base) const { return std::max(base, grown_); }

  // After each cycle, on every member alike: `wanted` is what the cycle's ready cached ops take
  // inline, each no larger than `most` (the largest space a record may carry).
  void Observe(size_t wanted, size_t most) {
    wanted = std::min(wanted, most);
    grown_ = std::max(grown_, wanted);  // at once: the next call of the same ops rides inline
    window_most_ = std::max(window_most_, wanted);
    if (++cycles_ == kWindow) {  // shrink to what this window needed
      grown_ = window_most_;
      window_most_ = 0;
      cycles_ = 0;
    }
  }

 private:
  // Idle cycles come every few milliseconds, so a space that is no longer needed goes within a
  // second or two; a training step's cycles come much more often than once a window.
  static constexpr int kWindow = 64;
  size_t grown_ = 0;
  size_t window_most_ = 0;
  int cycles_ = 0;
};

}  // namespace hvdcore
