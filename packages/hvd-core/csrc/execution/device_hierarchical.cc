// HOROVOD_HIERARCHICAL_ALLREDUCE for device tensors on the device backend: the ranks of one host
// reduce on the device (NCCL, over the GPUs' own links), and only their blocks cross hosts, on the
// CPU backend through pinned memory, as Horovod's NCCL hierarchical allreduce does with MPI. The
// steps are those of backend/hierarchical_comm.h: a reducescatter inside the host into one block
// per member (all of it to local rank 0 where hosts differ in size), an allreduce of the blocks
// across hosts, and an allgather inside the host (a broadcast from local rank 0).
//
// The batch is fused into one device buffer first. Scaling (prescale, postscale, Average) is one
// factor applied on the host to each block after the sum across hosts, so every element is scaled
// exactly once and integer tensors are scaled too.
#include "execution/batch.h"
#include "execution/executor.h"
#include "horovod/hvd_reduce.hpp"

namespace hvdcore {

Status Executor::DeviceHierarchicalAllreduce(ProcessSet& ps, const Response& r,
                                             std::vector<std::unique_ptr<TensorEntry>>& entries, DeviceStaging& staging,
                                             Comm& host, bool* declined) {
  HierarchicalComm& hierarchy = *ps.hierarchy;
  const size_t esize = hvd::dtype_size(r.dtype);
  const hvd_reduce_op op = BackendReduceOp(r.op);
  const double factor = r.prescale * EffectivePostscale(r, ps.size());
  std::vector<size_t> offsets;  // of each tensor in the fused buffer, in elements
  size_t total = 0;
  for (const auto& shape : r.shapes) {
    offsets.push_back(total);
    total += (size_t)Elements(shape);
  }
  // The batch in one device buffer: a lone tensor's output itself, else a fusion buffer.
  TensorEntry* lone = entries.size() == 1 ? entries[0].get() : nullptr;
  uint8_t* fused = nullptr;
  Status st;
  if (lone) {
    fused = static_cast<uint8_t*>(lone->output.data);
    if (lone->input.data != lone->output.data)
      st = staging.Copy(fused, lone->input.data, total * esize, "tensor '" + lone->name + "'");
  } else {
    void* buffer = nullptr;
    st = staging.Scratch(total * esize, nullptr, "the fusion buffer", &buffer);
    fused = static_cast<uint8_t*>(buffer);
    for (size_t i = 0; i < entries.size() && st.ok(); ++i) {
      const size_t count = (size_t)Elements(r.shapes[i]);
      uint8_t* at = fused + offsets[i] * esize;
      if (const TensorEntry* e = entries[i].get()) {
        st = staging.Copy(at, e->input.data, count * esize, "tensor '" + e->name + "'");
      } else {
        std::vector<uint8_t> neutral(count * esize);
        hvd::fill_identity(r.dtype, op, neutral.data(), count);
        st = staging.Upload(at, neutral.data(), neutral.size(), "the neutral data of tensor '" + r.names[i] + "'");
      }
    }
  }
  if (!st.ok()) return st;

  const std::vector<size_t> counts = hierarchy.BlockCounts(total);
  const size_t mine = counts[(size_t)hierarchy.local_index()];
  void* block = nullptr;
  st = staging.Scratch(std::max<size_t>(mine, 1) * esize, nullptr, "this rank's block", &block);
  if (st.ok()) st = host.Reducescatter(fused, block, counts, r.dtype, op);
  if (!st.ok() && host.declined()) {  // a dtype the backend cannot reduce: staged, on every rank alike
    *declined = true;
    return Status::Ok();
  }
  if (st.ok() && mine) {
    st = staging.ThroughHost(block, mine * esize, [&](void* data) {
      Status across = hierarchy.cross().Allreduce(data, data, mine, r.dtype, op);
      if (across.ok() && factor != 1.0) hvd::scale(r.dtype, data, mine, factor);
      return across;
    });
  }
  if (!st.ok()) return st;
  if (hierarchy.homogeneous()) {
    st = host.Allgatherv(block, fused, counts, r.dtype);
  } else {
    if (mine) st = staging.Copy(fused, block, total * esize, "the host's sum");
    if (st.ok()) st = host.Broadcast(fused, total, r.dtype, 0);
  }
  for (size_t i = 0; i < entries.size() && st.ok() && !lone; ++i) {  // the results out of the fusion buffer
    if (const TensorEntry* e = entries[i].get()) {
      st = staging.Copy(e->output.data, fused + offsets[i] * esize, (size_t)Elements(r.shapes[i]) * esize,
                        "tensor '" + e->name + "'");
    }
  }
  return st;
}

}  // namespace hvdcore
