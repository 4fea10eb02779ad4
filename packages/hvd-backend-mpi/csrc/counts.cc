#include "counts.h"

namespace hvd_mpi {

bool ToIntCounts(const size_t* counts, int n, std::vector<int>* ints, std::vector<int>* displs, std::string* why) {
  ints->resize((size_t)n);
  displs->resize((size_t)n);
  size_t offset = 0;
  for (int i = 0; i < n; ++i) {
    if (counts[i] > kMaxChunk || offset > kMaxChunk) {
      *why = "member " + std::to_string(i) + "'s block (" + std::to_string(counts[i]) + " elements at offset " +
             std::to_string(offset) + ") exceeds MPI's int counts (at most " + std::to_string(kMaxChunk) +
             " elements); split the tensor";
      return false;
    }
    (*ints)[(size_t)i] = (int)counts[i];
    (*displs)[(size_t)i] = (int)offset;
    offset += counts[i];
  }
  if (offset > kMaxChunk) {  // MPI computes the total as an int too (e.g. reduce_scatter)
    *why = "the blocks add up to " + std::to_string(offset) + " elements, more than MPI's int counts allow (" +
           std::to_string(kMaxChunk) + "); split the tensor";
    return false;
  }
  return true;
}

}  // namespace hvd_mpi
