// Arithmetic on a response's batch of entries, shared by the host and device paths of execution.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/handle.h"
#include "negotiation/message.h"

namespace hvdcore {

int64_t Elements(const std::vector<int64_t>& shape);

// Postscale including the division of Average, which backends never see.
double EffectivePostscale(const Response& r, int32_t set_size);

// Whether the memory of two entries of a batch overlaps (an entry's own input and output may be
// one buffer). A multi-buffer allreduce writes results while later buffers are still being read.
bool SharesMemory(const std::vector<std::unique_ptr<TensorEntry>>& entries, size_t esize);

// The first dimension's rows each member keeps of a reducescatter of `shape` over `n` members
// (the first d0 % n members one more), as element counts.
std::vector<size_t> ReducescatterCounts(const std::vector<int64_t>& shape, int32_t n);

// How an alltoall's blocks move for member `me` of `n`, from the splits its response carries (row i:
// what member i sends; a joined member's row is zeros): it sends its row, receives its column.
struct AlltoallLayout {
  std::vector<int64_t> recv_splits;             // rows from each member
  std::vector<size_t> send_counts, recv_counts;  // elements to and from each member
  int64_t total_rows = 0;                        // of the result
};
AlltoallLayout LayOutAlltoall(const Response& r, int32_t n, int32_t me);

// An allgather's element count from each member (its first dimension came with the response), and
// the result's rows.
std::vector<size_t> GatherCounts(const Response& r, int32_t n, int64_t* total_rows);

// The rows member `member` keeps of that reducescatter.
int64_t ReducescatterRows(const std::vector<int64_t>& shape, int32_t n, int32_t member);

// Describes an engine-allocated result in the entry's handle: `shape` with `rows` as its first
// dimension.
void DescribeResult(TensorEntry& e, hvd_dtype dtype, const std::vector<int64_t>& shape, int64_t rows);

}  // namespace hvdcore
