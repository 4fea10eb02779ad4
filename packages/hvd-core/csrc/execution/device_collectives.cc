// Collectives on device tensors through the device backend (NCCL): each is queued on the engine's
// stream of the device after that stream waited for the tensors' ready events, and completes with
// an event recorded after it, which the callers' streams wait on. Nothing here touches device
// memory from the host: a member without the tensor (joined) contributes neutral data uploaded
// from pinned memory, and engine-allocated results are device memory.
//
// What the backend cannot do it declines (HVD_ERR_UNSUPPORTED, having done nothing, on every member
// alike): such a response is staged through host memory and the CPU backend instead, as are the
// scaled ones a backend cannot scale (no kernel of the engine's touches device data).
#include <cstring>

#include "execution/batch.h"
#include "execution/executor.h"
#include "horovod/hvd_reduce.hpp"
#include "negotiation/response_cache.h"

namespace hvdcore {
namespace {

// "allreduce of tensors 'a', 'b'": what an error or the watch (backend/device_comm.h) names.
std::string Describe(const Response& r) {
  std::string names;
  constexpr size_t kNamed = 4;
  for (size_t i = 0; i < r.names.size() && i < kNamed; ++i) names += (i ? ", '" : "'") + r.names[i] + "'";
  if (r.names.size() > kNamed) names += " and " + std::to_string(r.names.size() - kNamed) + " more";
  return std::string(OpTypeName(r.type)) + (r.names.size() > 1 ? " of tensors " : " of tensor ") + names;
}

}  // namespace

Status Executor::RunOnDevice(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries,
                             bool* declined) {
  int32_t device_id = -1;  // the tensors'; a member without them (joined) lets the engine choose
  for (const auto& e : entries)
    if (e) {
      device_id = e->input.device_id;
      break;
    }
  // The global set's allreduces go host by host where HOROVOD_HIERARCHICAL_ALLREDUCE made hosts.
  const bool by_host = r.type == OpType::kAllreduce && ps.hierarchy && ps.hierarchy->allreduce;
  DeviceComm* dc = nullptr;
  Status st = route_.connect(ps, device_id, by_host, &dc);
  if (!st.ok()) return st.WithMessage(Describe(r) + ": " + st.message());
  DeviceStaging* staging = stagings_.For(dc->device_id(), &st);
  if (!staging) return st;
  for (const auto& e : entries) {
    if (!e) continue;
    st = staging->WaitReady(*e);
    if (!st.ok()) return st;
  }
  BeginActivity(r, entries);
  Comm& comm = dc->comm();
  switch (r.type) {
    case OpType::kAllreduce:
      st = by_host ? DeviceHierarchicalAllreduce(ps, r, entries, *staging, comm, declined)
                   : DeviceAllreduce(ps, r, entries, *staging, comm, declined);
      break;
    case OpType::kAllgather: st = DeviceAllgather(ps, r, entries[0], *staging, comm); break;
    case OpType::kBroadcast: st = DeviceBroadcast(ps, r, entries[0].get(), *staging, comm); break;
    case OpType::kAlltoall: st = DeviceAlltoall(ps, r, entries[0], *staging, comm); break;
    case OpType::kReducescatter: st = DeviceReducescatter(ps, r, entries[0].get(), *staging, comm, declined); break;
    default: *declined = true;  // no device data (barrier, join)
  }
  if (*declined) return Status::Ok();
  if (!st.ok()) return st.WithMessage(Describe(r) + " on the device: " + st.message());
  stats_.tensors += entries.size();
  ++stats_.backend_calls[(int)r.type];
  ++stats_.device_backend_calls;
  if (by_host) ++stats_.hierarchical_allreduces;
  if (r.names.size() > 1) ++stats_.fused_batches;
  std::shared_ptr<void> done;
  st = staging->Finish(entries, &done);
  if (st.ok()) dc->Queued(std::move(done), Describe(r));
  return st;
}

Status Executor::DeviceAllreduce(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries,
                                 DeviceStaging& staging, Comm& comm, bool* declined) {
  const size_t esize = hvd::dtype_size(r.dtype);
  const hvd_reduce_op op = BackendReduceOp(r.op);
  // Scaling before or after the sum are one factor to a backend that multiplies its inputs (NCCL's
  // ncclAvg and PreMulSum): equal but for rounding, and less prone to overflow in float16.
  const double factor = r.prescale * EffectivePostscale(r, ps.size());
  const bool buffers_call = comm.backend().has_allreduce_buffers();
  if (!buffers_call && factor != 1.0) {
    *declined = true;
    return Status::Ok();
  }
  // Tensors sharing memory (one tensor twice in a group) are reduced in copies of their own, as on
  // the host (Executor::AllreduceWhereTheyAre).
  const bool shared = SharesMemory(entries, esize);
  std::vector<hvd_buffer_pair> buffers;
  Status st;
  for (size_t i = 0; i < entries.size() && st.ok(); ++i) {
    const size_t count = (size_t)Elements(r.shapes[i]);
    const TensorEntry* e = entries[i].get();
    void* copy = nullptr;
    if (!e) {
      st = staging.Neutral(r.dtype, BackendReduceOp(r.op), count, r.names[i], &copy);
    } else if (shared) {
      st = staging.Scratch(count * esize, nullptr, "a copy of tensor '" + e->name + "'", &copy);
      if (st.ok()) st = staging.Copy(copy, e->input.data, count * esize, "tensor '" + e->name + "'");
    }
    if (copy) buffers.push_back({copy, copy, count});
    if (!copy && e) buffers.push_back({e->input.data, e->output.data, count});
  }
  if (!st.ok()) return st;
  if (buffers_call) {
    st = comm.AllreduceBuffers(buffers, r.dtype, op, factor, declined);
  } else {
    for (size_t i = 0; i < buffers.size() && st.ok(); ++i) {
      if (buffers[i].count) st = comm.Allreduce(buffers[i].sendbuf, buffers[i].recvbuf, buffers[i].count, r.dtype, op);
    }
    *declined = !st.ok() && comm.declined();
  }
  if (!st.ok() || *declined || !shared) return *declined ? Status::Ok() : st;
  for (size_t i = 0; i < entries.size() && st.ok(); ++i) {  // each copy's result to its tensor
    if (const TensorEntry* e = entries[i].get()) {
      st = staging.Copy(e->output.data, buffers[i].recvbuf, buffers[i].count * esize, "tensor '" + e->name + "'");
    }
  }
  return st;
}

Status Executor::DeviceAllgather(ProcessSet& ps, const Response& r, std::unique_ptr<TensorEntry>& e,
                                 DeviceStaging& staging, Comm& comm) {
  const int64_t row = RowElements(r.shapes[0]);
  Status st = CheckSizes(ps, r, e);  // may hand a joined member's entry back for later
  if (!st.ok()) return st;
  int64_t total_rows = 0;
  const std::vector<size_t> counts = GatherCounts(r, ps.size(), &total_rows);
  const size_t bytes = (size_t)(total_rows * row) * hvd::dtype_size(r.dtype);
  void* out = nullptr;
  st = e ? staging.Result(*e, bytes, &out) : staging.Scratch(bytes, nullptr, "allgather scratch space", &out);
  if (st.ok()) st = comm.Allgatherv(e ? e->input.data : nullptr, out, counts, r.dtype);
  if (st.ok() && e) DescribeResult(*e, r.dtype, e->input.shape, total_rows);
  return st;
}

Status Executor::DeviceBroadcast(ProcessSet& ps, const Response& r, TensorEntry* e, DeviceStaging& staging,
                                 Comm& comm) {
  const size_t count = (size_t)Elements(r.shapes[0]), bytes = count * hvd::dtype_size(r.dtype);
  void* buf = nullptr;
  Status st;
  if (!e) {
    st = staging.Scratch(bytes, nullptr, "broadcast scratch space", &buf);
  } else {
    buf = e->output.data;
    if (ps.my_rank == r.root && e->input.data != buf)
      st = staging.Copy(buf, e->input.data, bytes, "tensor '" + e->name + "'");
  }
  if (st.ok()) st = comm.Broadcast(buf, count, r.dtype, r.root);
  return st;
}

Status Executor::DeviceAlltoall(ProcessSet& ps, const Response& r, std::unique_ptr<TensorEntry>& e,
                                DeviceStaging& staging, Comm& comm) {
  const int64_t row = RowElements(r.shapes[0]);
  Status st = CheckSizes(ps, r, e);
  if (!st.ok()) return st;
  AlltoallLayout l = LayOutAlltoall(r, ps.size(), ps.my_rank);
  const size_t bytes = (size_t)(l.total_rows * row) * hvd::dtype_size(r.dtype);
  void* out = nullptr;
  st = e ? staging.Result(*e, bytes, &out) : staging.Scratch(bytes, nullptr, "alltoall scratch space", &out);
  if (st.ok()) st = comm.Alltoallv(e ? e->input.data : nullptr, l.send_counts, out, l.recv_counts, r.dtype);
  if (!st.ok() || !e) return st;
  DescribeResult(*e, r.dtype, e->input.shape, l.total_rows);
  e->handle->received_splits = std::move(l.recv_splits);
  return st;
}

Status Executor::DeviceReducescatter(ProcessSet& ps, const Response& r, TensorEntry* e, DeviceStaging& staging,
                                     Comm& comm, bool* declined) {
  const int32_t n = ps.size();
  if (r.prescale != 1.0 || EffectivePostscale(r, n) != 1.0) {  // the ABI's reducescatter does not scale
    *declined = true;
    return Status::Ok();
  }
  const size_t esize = hvd::dtype_size(r.dtype);
  const std::vector<int64_t>& shape = r.shapes[0];
  const std::vector<size_t> counts = ReducescatterCounts(shape, n);
  void* neutral = nullptr;
  void* out = nullptr;
  Status st;
  if (!e) st = staging.Neutral(r.dtype, BackendReduceOp(r.op), (size_t)Elements(shape), r.names[0], &neutral);
  const void* send = e ? e->input.data : neutral;
  const size_t bytes = counts[ps.my_rank] * esize;
  if (st.ok()) {
    st = e ? staging.Result(*e, bytes, &out) : staging.Scratch(bytes, nullptr, "reducescatter scratch space", &out);
  }
  if (st.ok()) st = comm.Reducescatter(send, out, counts, r.dtype, BackendReduceOp(r.op));
  if (!st.ok() && comm.declined()) {  // a dtype the backend cannot reduce (NCCL: int16)
    if (e) e->handle->output_device.reset();
    *declined = true;
    return Status::Ok();
  }
  if (st.ok() && e) DescribeResult(*e, r.dtype, shape, ReducescatterRows(shape, n, ps.my_rank));
  return st;
}

}  // namespace hvdcore
