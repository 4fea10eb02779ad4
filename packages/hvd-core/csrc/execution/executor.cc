#include "execution/executor.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "execution/adasum.h"
#include "execution/batch.h"
#include "horovod/hvd_reduce.hpp"

namespace hvdcore {
namespace {

void Scale(hvd_dtype dtype, void* buf, size_t count, double factor) {
  if (factor != 1.0) hvd::scale(dtype, buf, count, factor);
}

bool Fusable(const Response& a, const Response& b) {
  return a.kind == Response::Kind::kOp && b.kind == Response::Kind::kOp && a.type == OpType::kAllreduce &&
         b.type == OpType::kAllreduce && a.dtype == b.dtype && a.op == b.op && a.prescale == b.prescale &&
         a.postscale == b.postscale && a.device_kind == b.device_kind;
}

}  // namespace

// A tensor at least this large is reduced on its own, in place: copying it into the fusion buffer
// and back costs two passes over its memory, more than the one collective call fusing it saves
// (about 0.5 ms per MiB copied twice on the 2-core reference machine, against a call overhead of
// tens of microseconds in shared memory and a few hundred over TCP).
constexpr int64_t kUnfusedTensorBytes = 1 << 20;

std::vector<Response> Executor::Fuse(std::vector<Response> responses) const {
  std::vector<Response> out;
  out.reserve(responses.size());
  int64_t fused_bytes = 0;
  bool open = false;  // whether out.back() may take more tensors
  for (Response& r : responses) {
    int64_t bytes = r.kind == Response::Kind::kOp && r.type == OpType::kAllreduce
                        ? Elements(r.shapes[0]) * (int64_t)hvd::dtype_size(r.dtype)
                        : 0;
    bool small = bytes < kUnfusedTensorBytes;
    if (open && small && fusion_threshold_ > 0 && Fusable(out.back(), r) && fused_bytes + bytes <= fusion_threshold_) {
      out.back().names.push_back(std::move(r.names[0]));
      out.back().shapes.push_back(std::move(r.shapes[0]));
      fused_bytes += bytes;
      continue;
    }
    out.push_back(std::move(r));
    fused_bytes = bytes;
    open = small;
  }
  return out;
}

Status Executor::Execute(ProcessSet& ps, std::vector<Response> responses) {
  stagings_.Reclaim();
  Status failure;
  for (const Response& r : Fuse(std::move(responses))) {
    // Take this rank's entries; a missing one is legitimate only after join (neutral data).
    std::vector<std::unique_ptr<TensorEntry>> entries;
    for (const std::string& name : r.names) {
      auto it = ps.pending.find(name);
      if (it == ps.pending.end()) {
        entries.emplace_back();
        continue;
      }
      entries.push_back(std::move(it->second));
      ps.pending.erase(it);
    }
    bool all_missing = true;
    for (auto& e : entries) all_missing = all_missing && !e;
    if (all_missing && !ps.joined && r.type != OpType::kJoin) {
      failure = Status::Aborted("negotiation produced a response for tensor '" + r.names[0] +
                                "' that this rank never submitted");
    }
    for (const std::string& name : r.names) meter_.Arrive(name);  // a step may begin (timeline window)
    const int64_t started_us = NowMicros();
    Status st = failure.ok() ? RunPlaced(ps, r, entries) : failure;
    for (size_t i = 0; i < r.names.size() && st.ok(); ++i)
      meter_.Moved((uint64_t)Elements(r.shapes[i]) * hvd::dtype_size(r.dtype));
    if (st.ok() && job_stats_) RecordJobStats(ps, r, entries, started_us, NowMicros());
    // Last first: a caller synchronizes in submission order, so it wakes once, when the whole
    // batch is complete, instead of at its first tensor, to compete for its core with the
    // completion of the rest.
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      std::unique_ptr<TensorEntry>& e = *it;
      if (!e) continue;
      if (timeline_.active()) timeline_.End(e->name);
      Status result = st;
      if (st.ok() && r.kind == Response::Kind::kError) result = Status::Mismatch(r.error);
      complete_(ps, std::move(e), result);
    }
    if (!st.ok() && failure.ok()) failure = st;
    if (!failure.ok()) break;
  }
  return failure;
}

Status Executor::RunPlaced(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries) {
  // Decided by the negotiated response alone, so that every member, a joined one without the
  // tensor included, takes the same path.
  // Adasum is the engine's own algorithm: device tensors are staged for it.
  if (r.kind == Response::Kind::kOp && r.device_kind != HVD_DEVICE_CPU && route_.Takes(r.type) &&
      r.op != ReduceOp::kAdasum) {
    bool declined = false;
    Status st = RunOnDevice(ps, r, entries, &declined);
    device_failure_ = !declined && !st.ok();
    if (!declined) return st;
  }
  // Entries of one response are on one kind of device (negotiation agreed); the first one's device
  // stages them all (its stream reaches any device's memory).
  auto device_entry = std::find_if(entries.begin(), entries.end(),
                                   [](const auto& e) { return e && e->input.device_kind != HVD_DEVICE_CPU; });
  if (device_entry == entries.end()) return Run(ps, r, entries);
  Status st;
  DeviceStaging* staging = stagings_.For((*device_entry)->input.device_id, &st);
  if (!staging) return st;
  st = staging->StageIn(entries);
  if (st.ok()) st = Run(ps, r, entries);
  Status out = staging->StageOut(entries, st.ok());
  return st.ok() ? out : st;
}

void Executor::RecordJobStats(const ProcessSet& ps, const Response& r,
                              const std::vector<std::unique_ptr<TensorEntry>>& entries, int64_t started_us,
                              int64_t ended_us) {
  if (r.kind != Response::Kind::kOp) return;
  uint64_t total = 0;
  for (size_t i = 0; i < r.names.size(); ++i) {
    const uint64_t bytes = i < r.shapes.size() ? (uint64_t)Elements(r.shapes[i]) * hvd::dtype_size(r.dtype) : 0;
    total += bytes;
    if (i < entries.size() && entries[i]) {
      const int64_t submitted = entries[i]->enqueued_us;
      job_stats_->RecordTensor(ps.id, r.names[i], bytes, started_us - submitted, ended_us - submitted);
    }
  }
  job_stats_->RecordOp(ps.id, r.type, r.names.size(), total, ended_us - started_us);
  if (r.names.size() > 1) job_stats_->RecordFusedBuffer(total);
}

void Executor::BeginActivity(const Response& r, const std::vector<std::unique_ptr<TensorEntry>>& entries) {
  if (!timeline_.active()) return;
  std::string activity = OpTypeName(r.type);
  for (char& c : activity) c = (char)toupper(c);
  for (auto& x : entries)
    if (x) {
      timeline_.End(x->name);  // negotiation ends
      timeline_.Begin(x->name, activity);
    }
}

namespace {

// An allreduce from every member's inline contribution.
void ReduceInline(const Response& r, const std::vector<const uint8_t*>& parts, uint8_t* out, size_t count, size_t bytes,
                  int32_t set_size) {
  // Every member reduces the same gathered bytes in rank order: results are bit-identical.
  bool first = true;
  for (const uint8_t* part : parts) {
    if (!part) continue;
    if (first) {
      if (bytes) std::memcpy(out, part, bytes);
      first = false;
    } else {
      hvd::reduce_into(r.dtype, BackendReduceOp(r.op), out, part, count);
    }
  }
  Scale(r.dtype, out, count, EffectivePostscale(r, set_size));
}

// An allgather's or alltoall's result from every member's inline data (parts: whole inputs, null
// for members that joined without the tensor, whose sizes are then zeros).
void GatherInline(const Response& r, const std::vector<const uint8_t*>& parts, int32_t me, TensorEntry& e) {
  const int32_t n = (int32_t)parts.size();
  const size_t row_bytes = (size_t)RowElements(r.shapes[0]) * hvd::dtype_size(r.dtype);
  const bool alltoall = r.type == OpType::kAlltoall;
  // Member m's rows for this member: all of its input (allgather), or its block for `me` (alltoall).
  auto rows_from = [&](int32_t m) { return alltoall ? r.tensor_sizes[(size_t)m * n + me] : r.tensor_sizes[m]; };
  int64_t total_rows = 0;
  for (int32_t m = 0; m < n; ++m) total_rows += rows_from(m);
  auto out = std::make_shared<Buffer>((size_t)total_rows * row_bytes);
  uint8_t* at = static_cast<uint8_t*>(out->data());
  std::vector<int64_t> received(alltoall ? n : 0);
  for (int32_t m = 0; m < n; ++m) {
    const size_t bytes = (size_t)rows_from(m) * row_bytes;
    int64_t skip = 0;  // rows of m's input that go to the members before this one
    for (int32_t j = 0; alltoall && j < me; ++j) skip += r.tensor_sizes[(size_t)m * n + j];
    if (bytes) std::memcpy(at, parts[m] + (size_t)skip * row_bytes, bytes);
    at += bytes;
    if (alltoall) received[m] = rows_from(m);
  }
  e.handle->output = out;
  e.handle->output_dtype = r.dtype;
  e.handle->output_shape = e.input.shape;
  e.handle->output_shape[0] = total_rows;
  e.handle->received_splits = std::move(received);
}

}  // namespace

void Executor::ExecuteInline(ProcessSet& ps, const std::vector<InlineCompletion>& completions) {
  for (const InlineCompletion& done : completions) {
    const Response& r = done.response;
    auto it = ps.pending.find(r.names[0]);
    if (it == ps.pending.end()) continue;  // this rank joined: nothing to contribute or receive
    const bool gathered = r.type == OpType::kAllgather || r.type == OpType::kAlltoall;
    // This rank joined and sent its entry to the coordinator instead (CheckSizes says when): the
    // others completed without it, and the entry waits for the coordinator's response.
    if (gathered && !done.parts[ps.my_rank]) continue;
    std::unique_ptr<TensorEntry> e = std::move(it->second);
    ps.pending.erase(it);
    meter_.Arrive(e->name);
    if (timeline_.active()) {
      timeline_.End(e->name);
      std::string activity = std::string(OpTypeName(r.type)) + "_INLINE";
      for (char& c : activity) c = (char)toupper(c);
      timeline_.Begin(e->name, activity);
    }
    const size_t count = (size_t)Elements(r.shapes[0]), bytes = count * hvd::dtype_size(r.dtype);
    uint8_t* out = (uint8_t*)e->output.data;
    if (gathered) {
      GatherInline(r, done.parts, ps.my_rank, *e);
    } else if (r.type == OpType::kBroadcast) {
      // The root's data, from its gathered record (the root too copies it into its output).
      if (bytes) std::memcpy(out, done.parts[r.root], bytes);
    } else {
      ReduceInline(r, done.parts, out, count, bytes, ps.size());
    }
    ++stats_.tensors;
    meter_.Moved(bytes);
    if (job_stats_) {
      const int64_t now = NowMicros();
      job_stats_->RecordTensor(ps.id, r.names[0], bytes, now - e->enqueued_us, now - e->enqueued_us);
      job_stats_->RecordOp(ps.id, r.type, 1, bytes, 0);  // no data movement beyond negotiation's
    }
    if (timeline_.active()) timeline_.End(e->name);
    complete_(ps, std::move(e), Status::Ok());
  }
}

Status Executor::Run(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries) {
  if (r.kind == Response::Kind::kError) return Status::Ok();  // completed with the error by the caller
  TensorEntry* e = entries[0].get();
  BeginActivity(r, entries);
  stats_.tensors += entries.size();
  switch (r.type) {
    case OpType::kAllreduce: return Allreduce(ps, r, entries);
    case OpType::kAllgather: return Allgather(ps, r, entries[0]);
    case OpType::kBroadcast: return Broadcast(ps, r, e);
    case OpType::kAlltoall: return Alltoall(ps, r, entries[0]);
    case OpType::kReducescatter: return Reducescatter(ps, r, e);
    case OpType::kBarrier: ++stats_.backend_calls[(int)OpType::kBarrier]; return ps.comm->Barrier();
    case OpType::kJoin:
      ps.joined = false;
      if (e) e->handle->value = ps.ranks[r.last_joined_rank];
      return Status::Ok();
    default: return Status::Aborted(std::string("unexpected response type ") + OpTypeName(r.type));
  }
}

Status Executor::ReduceAll(ProcessSet& ps, const void* send, void* recv, size_t count, hvd_dtype dtype,
                           hvd_reduce_op op) {
  if (ps.hierarchy && ps.hierarchy->allreduce) {
    ++stats_.hierarchical_allreduces;
    return ps.hierarchy->Allreduce(send, recv, count, dtype, op);
  }
  return ps.comm->Allreduce(send, recv, count, dtype, op);
}

Status Executor::Allreduce(ProcessSet& ps, const Response& r, std::vector<std::unique_ptr<TensorEntry>>& entries) {
  const size_t esize = hvd::dtype_size(r.dtype);
  const hvd_reduce_op op = BackendReduceOp(r.op);
  const double post = EffectivePostscale(r, ps.size());
  ++stats_.backend_calls[(int)OpType::kAllreduce];
  if (entries.size() > 1) ++stats_.fused_batches;
  const bool adasum = r.op == ReduceOp::kAdasum;  // the engine's own algorithm (execution/adasum.h)
  // A prescale changes the input, which only a copy may: such batches take the path below. The
  // choice rests on the negotiated response alone, so that every member calls the backend alike
  // (a backend may check that they do); memory shared between tensors of this rank's batch is
  // handled inside (AllreduceWhereTheyAre).
  if (!adasum && ps.comm->backend().has_allreduce_buffers() && r.prescale == 1.0 &&
      !(ps.hierarchy && ps.hierarchy->allreduce)) {
    bool declined = false;
    Status st = AllreduceWhereTheyAre(ps, r, entries, op, post, &declined);
    if (!declined) return st;
    ++stats_.declined_buffer_calls;  // the backend left it to the paths below, on every member
  }

  if (entries.size() == 1) {  // unfused: reduce in the caller's output buffer, no extra copy
    TensorEntry* e = entries[0].get();
    size_t count = (size_t)Elements(r.shapes[0]);
    std::vector<uint8_t> neutral;
    void* buf;
    const void* send;
    if (e) {
      buf = e->output.data;
      send = e->input.data;  // out of place when unscaled: the backend reads the input directly
      if (r.prescale != 1.0 || adasum) {  // Adasum combines in place
        if (e->input.data != buf && count) std::memcpy(buf, e->input.data, count * esize);
        Scale(r.dtype, buf, count, r.prescale);
        send = buf;
      }
    } else {
      neutral.resize(count * esize);
      hvd::fill_identity(r.dtype, op, neutral.data(), count);
      buf = neutral.data();
      send = buf;
    }
    Status st = adasum ? AdasumAllreduce(*ps.comm, static_cast<uint8_t*>(buf), {count}, r.dtype, adasum_scratch_)
                       : ReduceAll(ps, send, buf, count, r.dtype, op);
    if (st.ok() && e) Scale(r.dtype, buf, count, post);
    return st;
  }

  std::vector<size_t> counts;
  size_t total = 0;
  for (const auto& shape : r.shapes) {
    counts.push_back((size_t)Elements(shape));
    total += counts.back();
  }
  if (ps.fusion_buffer.size() < total * esize) ps.fusion_buffer.resize(total * esize);
  uint8_t* fused = ps.fusion_buffer.data();
  size_t offset = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    TensorEntry* e = entries[i].get();
    uint8_t* dst = fused + offset * esize;
    if (e) {
      if (timeline_.active()) timeline_.Begin(e->name, "MEMCPY_IN_FUSION_BUFFER");
      if (counts[i]) std::memcpy(dst, e->input.data, counts[i] * esize);
      Scale(r.dtype, dst, counts[i], r.prescale);
      if (timeline_.active()) timeline_.End(e->name);
    } else {
      hvd::fill_identity(r.dtype, op, dst, counts[i]);
    }
    offset += counts[i];
  }
  Status st = adasum ? AdasumAllreduce(*ps.comm, fused, counts, r.dtype, adasum_scratch_)
                     : ReduceAll(ps, fused, fused, total, r.dtype, op);
  if (!st.ok()) return st;
  offset = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    TensorEntry* e = entries[i].get();
    if (e) {
      if (timeline_.active()) timeline_.Begin(e->name, "MEMCPY_OUT_FUSION_BUFFER");
      uint8_t* src = fused + offset * esize;
      Scale(r.dtype, src, counts[i], post);
      if (counts[i]) std::memcpy(e->output.data, src, counts[i] * esize);
      if (timeline_.active()) timeline_.End(e->name);
    }
    offset += counts[i];
  }
  return Status::Ok();
}

Status Executor::AllreduceWhereTheyAre(ProcessSet& ps, const Response& r,
                                       std::vector<std::unique_ptr<TensorEntry>>& entries, hvd_reduce_op op,
                                       double post, bool* declined) {
  const size_t esize = hvd::dtype_size(r.dtype);
  // Tensors of this batch sharing memory (the same tensor twice in a group) would read each other's
  // results: each then goes through its own place in the fusion buffer instead, and the call stays
  // the one every other member makes (the same buffer counts and scale).
  const bool staged = SharesMemory(entries, esize);
  if (staged) {
    size_t elements = 0;
    for (const auto& shape : r.shapes) elements += (size_t)Elements(shape);
    if (ps.fusion_buffer.size() < elements * esize) ps.fusion_buffer.resize(elements * esize);
  }
  std::vector<hvd_buffer_pair> buffers;
  buffers.reserve(entries.size());
  std::vector<std::vector<uint8_t>> neutral;  // what a joined rank contributes for tensors it lacks
  uint8_t* stage = ps.fusion_buffer.data();   // the next free place, when staged
  for (size_t i = 0; i < entries.size(); ++i) {
    const size_t count = (size_t)Elements(r.shapes[i]);
    if (const TensorEntry* e = entries[i].get()) {
      if (staged) {
        if (count) std::memcpy(stage, e->input.data, count * esize);
        buffers.push_back({stage, stage, count});
        stage += count * esize;
      } else {
        buffers.push_back({e->input.data, e->output.data, count});
      }
      continue;
    }
    neutral.emplace_back(count * esize);
    hvd::fill_identity(r.dtype, op, neutral.back().data(), count);
    buffers.push_back({neutral.back().data(), neutral.back().data(), count});
  }
  Status st = ps.comm->AllreduceBuffers(buffers, r.dtype, op, post, declined);
  if (!st.ok() || *declined || !staged) return st;
  for (size_t i = 0; i < entries.size(); ++i) {  // each staged result to its tensor
    if (const TensorEntry* e = entries[i].get(); e && buffers[i].count) {
      std::memcpy(e->output.data, buffers[i].recvbuf, buffers[i].count * esize);
    }
  }
  return st;
}

// The sizes an allgather or alltoall response carries (message.h) must be whole and, for this
// member, what its entry holds: the data moves by them, so a mistake would read or write past a
// buffer. One case differs legitimately: this member joined, and in the cycle its entry went to the
// coordinator (renegotiated: stalled, or with sizes too large to travel with a cache bit) every
// other member found the tensor in the cache and took part, counting this member as joined without
// it (no sizes). It then takes part with nothing, as they expect, and its entry goes back to wait
// for the coordinator, which holds its request.
Status Executor::CheckSizes(ProcessSet& ps, const Response& r, std::unique_ptr<TensorEntry>& e) const {
  const int32_t n = ps.size();
  const size_t per = (size_t)SizesPerMember(r.type, n);
  if (r.tensor_sizes.size() != per * n) {
    return Status::Aborted("negotiation gave " + std::string(OpTypeName(r.type)) + " of tensor '" + r.names[0] + "' " +
                           std::to_string(r.tensor_sizes.size()) + " sizes, expected " + std::to_string(per * n));
  }
  for (int64_t x : r.tensor_sizes)
    if (x < 0) return Status::Aborted("negotiation gave a negative size for tensor '" + r.names[0] + "'");
  if (!e) return Status::Ok();  // joined without the tensor: its sizes are zeros on every member
  const auto mine_at = r.tensor_sizes.begin() + per * ps.my_rank;
  const std::vector<int64_t> mine = MemberSizes(*e, n);
  if (std::equal(mine.begin(), mine.end(), mine_at)) return Status::Ok();
  if (ps.joined && e->sent_to_coordinator && std::all_of(mine_at, mine_at + per, [](int64_t x) { return x == 0; })) {
    std::string name = e->name;
    ps.pending[name] = std::move(e);
    return Status::Ok();
  }
  return Status::Aborted("negotiation gave " + std::string(OpTypeName(r.type)) + " of tensor '" + r.names[0] +
                         "' other sizes for this rank than it submitted");
}

Status Executor::Allgather(ProcessSet& ps, const Response& r, std::unique_ptr<TensorEntry>& e) {
  const size_t esize = hvd::dtype_size(r.dtype);
  const int64_t row = RowElements(r.shapes[0]);
  // Every member's first dimension came with the response (a joined member's is 0): no exchange.
  Status st = CheckSizes(ps, r, e);
  if (!st.ok()) return st;
  int64_t total_rows = 0;
  const std::vector<size_t> counts = GatherCounts(r, ps.size(), &total_rows);
  auto out = std::make_shared<Buffer>((size_t)(total_rows * row) * esize, output_pool_);
  ++stats_.backend_calls[(int)OpType::kAllgather];
  if (ps.hierarchy && ps.hierarchy->allgather) {
    ++stats_.hierarchical_allgathers;
    st = ps.hierarchy->Allgatherv(e ? e->input.data : nullptr, out->data(), counts, r.dtype);
  } else {
    st = ps.comm->Allgatherv(e ? e->input.data : nullptr, out->data(), counts, r.dtype);
  }
  if (!st.ok() || !e) return st;
  e->handle->output = out;
  DescribeResult(*e, r.dtype, e->input.shape, total_rows);
  return st;
}

Status Executor::Broadcast(ProcessSet& ps, const Response& r, TensorEntry* e) {
  const size_t count = (size_t)Elements(r.shapes[0]), esize = hvd::dtype_size(r.dtype);
  std::vector<uint8_t> scratch;
  void* buf;
  if (e) {
    buf = e->output.data;
    if (ps.my_rank == r.root && e->input.data != buf && count) std::memcpy(buf, e->input.data, count * esize);
  } else {
    scratch.resize(count * esize);
    buf = scratch.data();
  }
  if (!r.eager_from.empty()) {  // the root sent its data ahead (negotiation/eager.h)
    if (ps.my_rank == r.root) return ps.eager.Settle();
    return ps.eager.Take(r.root, e ? buf : nullptr, count * esize);
  }
  ++stats_.backend_calls[(int)OpType::kBroadcast];
  return ps.comm->Broadcast(buf, count, r.dtype, r.root);
}

Status Executor::Alltoall(ProcessSet& ps, const Response& r, std::unique_ptr<TensorEntry>& e) {
  const size_t esize = hvd::dtype_size(r.dtype);
  const int64_t row = RowElements(r.shapes[0]);
  // The response holds every member's splits: no exchange of splits.
  Status st = CheckSizes(ps, r, e);
  if (!st.ok()) return st;
  AlltoallLayout l = LayOutAlltoall(r, ps.size(), ps.my_rank);
  auto out = std::make_shared<Buffer>((size_t)(l.total_rows * row) * esize, output_pool_);
  if (r.eager_from.empty()) {
    ++stats_.backend_calls[(int)OpType::kAlltoall];
    st = ps.comm->Alltoallv(e ? e->input.data : nullptr, l.send_counts, out->data(), l.recv_counts, r.dtype);
  } else {
    st = AlltoallWithEager(ps, r, e.get(), l.send_counts, l.recv_counts, out->data());
  }
  if (!st.ok() || !e) return st;
  e->handle->output = out;
  DescribeResult(*e, r.dtype, e->input.shape, l.total_rows);
  e->handle->received_splits = std::move(l.recv_splits);
  return st;
}

// The blocks of members that sent theirs ahead (negotiation/eager.h) are in this member's eager
// space, and those members send nothing more: the backend call carries only the other members'
// blocks (none when every member sent ahead, save each member's own block, copied here).
Status Executor::AlltoallWithEager(ProcessSet& ps, const Response& r, const TensorEntry* e,
                                   std::vector<size_t> send_counts, std::vector<size_t> recv_counts, uint8_t* out) {
  const int32_t n = ps.size(), me = ps.my_rank;
  const size_t esize = hvd::dtype_size(r.dtype);
  std::vector<bool> ahead(n, false);
  for (int32_t m : r.eager_from) ahead[m] = true;
  std::vector<size_t> recv_at(n, 0), send_at(n, 0);  // where each block lies in the output and input, in elements
  for (int32_t i = 1; i < n; ++i) {
    recv_at[i] = recv_at[i - 1] + recv_counts[i - 1];
    send_at[i] = send_at[i - 1] + send_counts[i - 1];
  }
  const std::vector<size_t> full_recv = recv_counts;
  for (int32_t i = 0; i < n; ++i) {
    if (i == me) continue;
    if (ahead[me]) send_counts[i] = 0;
    if (ahead[i]) recv_counts[i] = 0;
  }
  const uint8_t* input = e ? static_cast<const uint8_t*>(e->input.data) : nullptr;
  Status st;
  if ((int32_t)r.eager_from.size() < n) {
    // Backends pack blocks by their counts: a member that sent ahead passes its own block as its
    // first, and the blocks this member receives, packed from the output's start, move to their
    // places below.
    const uint8_t* send = input && ahead[me] ? input + send_at[me] * esize : input;
    ++stats_.backend_calls[(int)OpType::kAlltoall];
    st = ps.comm->Alltoallv(send, send_counts, out, recv_counts, r.dtype);
    if (!st.ok()) return st;
    size_t packed_end = 0;
    for (size_t c : recv_counts) packed_end += c;
    for (int32_t i = n - 1; i >= 0; --i) {  // last first: every block moves toward the end
      if (!recv_counts[i]) continue;
      packed_end -= recv_counts[i];
      if (packed_end != recv_at[i])
        std::memmove(out + recv_at[i] * esize, out + packed_end * esize, recv_counts[i] * esize);
    }
  } else if (input && recv_counts[me]) {
    std::memcpy(out + recv_at[me] * esize, input + send_at[me] * esize, recv_counts[me] * esize);
  }
  for (int32_t i = 0; i < n; ++i) {
    if (i == me || !ahead[i]) continue;
    st = ps.eager.Take(i, e ? out + recv_at[i] * esize : nullptr, full_recv[i] * esize);
    if (!st.ok()) return st;
  }
  return ahead[me] ? ps.eager.Settle() : Status::Ok();
}

Status Executor::Reducescatter(ProcessSet& ps, const Response& r, TensorEntry* e) {
  const int32_t n = ps.size();
  const size_t esize = hvd::dtype_size(r.dtype);
  const hvd_reduce_op op = BackendReduceOp(r.op);
  const std::vector<int64_t>& shape = r.shapes[0];
  const int64_t total = Elements(shape);
  const std::vector<size_t> counts = ReducescatterCounts(shape, n);
  std::vector<uint8_t> scratch;
  const void* send;
  if (!e) {
    scratch.resize((size_t)total * esize);
    hvd::fill_identity(r.dtype, op, scratch.data(), (size_t)total);
    send = scratch.data();
  } else if (r.prescale != 1.0) {  // never modify the caller's input
    const uint8_t* in = (const uint8_t*)e->input.data;
    scratch.assign(in, in + (size_t)total * esize);
    Scale(r.dtype, scratch.data(), (size_t)total, r.prescale);
    send = scratch.data();
  } else {
    send = e->input.data;
  }
  auto out = std::make_shared<Buffer>(counts[ps.my_rank] * esize, output_pool_);
  ++stats_.backend_calls[(int)OpType::kReducescatter];
  Status st = ps.comm->Reducescatter(send, out->data(), counts, r.dtype, op);
  if (!st.ok() || !e) return st;
  Scale(r.dtype, out->data(), counts[ps.my_rank], EffectivePostscale(r, n));
  e->handle->output = out;
  DescribeResult(*e, r.dtype, shape, ReducescatterRows(shape, n, ps.my_rank));
  return st;
}

}  // namespace hvdcore
