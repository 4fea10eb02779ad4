// MPI counts and displacements are C ints; hvd's are size_t. Buffers beyond INT_MAX elements are
// moved in pieces where the operation allows it (allreduce, broadcast, send/recv) and refused with
// a clear message where it does not (the v-collectives' displacements).
#pragma once

#include <climits>
#include <cstddef>
#include <string>
#include <vector>

namespace hvd_mpi {

constexpr size_t kMaxChunk = (size_t)INT_MAX;

// Fills `ints` with `counts` and `displs` with their running sums. False, with `why` set, when a
// count or a displacement does not fit in an int.
bool ToIntCounts(const size_t* counts, int n, std::vector<int>* ints, std::vector<int>* displs, std::string* why);

// Calls fn(first, n) for consecutive pieces of at most kMaxChunk elements covering [0, count);
// stops at, and returns, the first status that is not 0.
template <typename Fn>
int ForEachChunk(size_t count, Fn&& fn) {
  for (size_t first = 0; first < count; first += kMaxChunk) {
    size_t n = count - first < kMaxChunk ? count - first : kMaxChunk;
    int status = fn(first, (int)n);
    if (status != 0) return status;
  }
  return 0;
}

}  // namespace hvd_mpi
