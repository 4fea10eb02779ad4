#include "execution/batch.h"

#include <algorithm>

#include "negotiation/response_cache.h"

namespace hvdcore {

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

double EffectivePostscale(const Response& r, int32_t set_size) {
  return r.op == ReduceOp::kAverage ? r.postscale / set_size : r.postscale;
}

bool SharesMemory(const std::vector<std::unique_ptr<TensorEntry>>& entries, size_t esize) {
  if (entries.size() < 2) return false;
  struct Range {
    uintptr_t begin, end;
    size_t entry;
  };
  std::vector<Range> ranges;
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorEntry* e = entries[i].get();
    const size_t bytes = e ? (size_t)Elements(e->input.shape) * esize : 0;
    if (!bytes) continue;
    ranges.push_back({(uintptr_t)e->input.data, (uintptr_t)e->input.data + bytes, i});
    if (e->output.data != e->input.data)
      ranges.push_back({(uintptr_t)e->output.data, (uintptr_t)e->output.data + bytes, i});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  // Sweep in address order, keeping the furthest end reached and whose it is.
  uintptr_t reach = 0;
  size_t owner = 0;
  for (const Range& r : ranges) {
    if (r.begin < reach && r.entry != owner) return true;
    if (r.end > reach) reach = r.end, owner = r.entry;
  }
  return false;
}

std::vector<size_t> ReducescatterCounts(const std::vector<int64_t>& shape, int32_t n) {
  const int64_t row = RowElements(shape);
  std::vector<size_t> counts(n);
  for (int32_t i = 0; i < n; ++i) counts[i] = (size_t)(ReducescatterRows(shape, n, i) * row);
  return counts;
}

AlltoallLayout LayOutAlltoall(const Response& r, int32_t n, int32_t me) {
  const int64_t row = RowElements(r.shapes[0]);
  AlltoallLayout l{std::vector<int64_t>(n), std::vector<size_t>(n), std::vector<size_t>(n), 0};
  for (int32_t i = 0; i < n; ++i) {
    l.recv_splits[i] = r.tensor_sizes[(size_t)i * n + me];
    l.send_counts[i] = (size_t)(r.tensor_sizes[(size_t)me * n + i] * row);
    l.recv_counts[i] = (size_t)(l.recv_splits[i] * row);
    l.total_rows += l.recv_splits[i];
  }
  return l;
}

std::vector<size_t> GatherCounts(const Response& r, int32_t n, int64_t* total_rows) {
  const int64_t row = RowElements(r.shapes[0]);
  std::vector<size_t> counts(n);
  *total_rows = 0;
  for (int32_t i = 0; i < n; ++i) {
    counts[i] = (size_t)(r.tensor_sizes[i] * row);
    *total_rows += r.tensor_sizes[i];
  }
  return counts;
}

int64_t ReducescatterRows(const std::vector<int64_t>& shape, int32_t n, int32_t member) {
  return shape[0] / n + (member < shape[0] % n ? 1 : 0);
}

void DescribeResult(TensorEntry& e, hvd_dtype dtype, const std::vector<int64_t>& shape, int64_t rows) {
  e.handle->output_dtype = dtype;
  e.handle->output_shape = shape;
  e.handle->output_shape[0] = rows;
}

}  // namespace hvdcore
