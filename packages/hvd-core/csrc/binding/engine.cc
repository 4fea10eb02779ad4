// Engine: starting and stopping an engine, submitting operations, process sets, the timeline and
// the engine's counters.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "binding/bindings.h"
#include "binding/caller_buffer.h"
#include "core/output_buffer.h"
#include "engine/engine.h"
#include "horovod/hvd_reduce.hpp"

namespace hvdcore::binding {

namespace {

nb::dict JobStatsDict(const JobStats::Snapshot& s) {
  nb::dict out, sets;
  for (const auto& [id, set] : s.sets) {
    nb::dict d, ops, tensors, lateness, stalled;
    for (int t = 0; t < kOpTypeCount; ++t) {
      const JobStats::OpTotals& op = set.ops[t];
      if (op.count) ops[OpTypeName((OpType)t)] = nb::make_tuple(op.count, op.bytes, op.time_us);
    }
    for (const auto& [name, x] : set.tensors)
      tensors[nb::str(name.c_str())] = nb::make_tuple(x.count, x.bytes, x.total_us, x.most_us, x.wait_us);
    for (const auto& [rank, l] : set.lateness)
      lateness[nb::int_(rank)] = nb::make_tuple(l.last, l.late_us, l.most_us, l.most_tensor);
    for (const auto& [name, count] : set.stalled_tensors) stalled[nb::str(name.c_str())] = count;
    d["ops"] = ops;  // op type -> (tensors, bytes, time_us)
    d["wait_us"] = set.wait_us;
    d["tensors"] = tensors;  // name -> (count, bytes, total_us, most_us, wait_us)
    d["arrivals"] = set.arrivals;
    d["lateness"] = lateness;  // job rank -> (times last, late_us summed, most_us, its tensor)
    d["stalls"] = set.stalls;
    d["stalled_tensors"] = stalled;
    sets[nb::int_(id)] = d;
  }
  out["sets"] = sets;
  out["fused_buffers"] = s.fused_buffers;
  out["fused_bytes"] = s.fused_bytes;
  out["most_fused_bytes"] = s.most_fused_bytes;
  return out;
}

}  // namespace

using namespace nb::literals;

void BindEngine(nb::module_& m) {
  nb::class_<Engine>(m, "Engine")
      .def(nb::init<EngineConfig, std::shared_ptr<Backend>, std::shared_ptr<KVStore>, std::shared_ptr<Backend>>(),
           "config"_a, "backend"_a, "store"_a, "device_backend"_a.none() = nullptr)
      .def("start", &Engine::Start, nb::call_guard<nb::gil_scoped_release>())
      .def("shutdown", &Engine::Shutdown, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("running", &Engine::running)
      .def_prop_ro("rank", [](const Engine& e) { return e.config().rank; })
      .def_prop_ro("size", [](const Engine& e) { return e.config().size; })
      .def_prop_ro("backend_name", [](const Engine& e) { return e.backend().name(); })
      .def_prop_ro("device_backend_name",
                   [](const Engine& e) -> std::optional<std::string> {
                     if (!e.device_backend()) return std::nullopt;
                     return e.device_backend()->name();
                   })
      .def(
          "enqueue",
          [](Engine& eng, int op_type, const std::string& name, std::optional<CallerBuffer> input, int dtype,
             std::vector<int64_t> shape, std::optional<CallerBuffer> output, int op, int root, double prescale,
             double postscale, int process_set, std::optional<std::vector<int64_t>> splits, int64_t group_id,
             int group_size, uint32_t device_kind, bool inplace, int device_id, uintptr_t stream) {
            if (op_type < 0 || op_type >= kOpTypeCount) Throw(Status::InvalidArgument("unknown op type"));
            if (op < 0 || op >= kReduceOpCount)
              Throw(Status::InvalidArgument("unknown reduce op " + std::to_string(op)));
            auto e = std::make_unique<TensorEntry>();
            e->type = (OpType)op_type;
            e->name = name;
            e->input = MakeView("input", name, input, dtype, shape, device_kind);
            e->input.device_id = device_kind == HVD_DEVICE_CPU ? -1 : device_id;
            e->stream = reinterpret_cast<hvd_stream_t>(stream);
            if (inplace) {
              e->output = e->input;  // the result overwrites the input: one buffer crosses, not two
            } else if (output) {
              e->output = MakeView("output", name, output, dtype, shape, device_kind);
              e->output.device_id = e->input.device_id;
              // hvd's frameworks allocate a separate output just before submitting, and the
              // collective writes it first: in huge pages, a large one takes a fraction of the
              // page faults' time (core/output_buffer.h). Other callers' outputs get the same advice,
              // which changes no data.
              if (device_kind == HVD_DEVICE_CPU) {
                AdviseCallerOutput(e->output.data, (size_t)e->output.num_elements() * hvd::dtype_size(e->output.dtype));
              }
            }
            e->op = (ReduceOp)op;
            e->root = root;
            e->prescale = prescale;
            e->postscale = postscale;
            e->process_set_id = process_set;
            if (splits) e->splits = *splits;
            e->group_id = group_id;
            e->group_size = group_size;
            return eng.Enqueue(std::move(e));
          },
          "op_type"_a, "name"_a, "input"_a.none(), "dtype"_a, "shape"_a, "output"_a.none() = nb::none(),
          "op"_a = (int)ReduceOp::kSum, "root"_a = -1, "prescale"_a = 1.0, "postscale"_a = 1.0, "process_set"_a = 0,
          "splits"_a.none() = nb::none(), "group_id"_a = -1, "group_size"_a = 0,
          "device_kind"_a = (uint32_t)HVD_DEVICE_CPU, "inplace"_a = false, "device_id"_a = 0, "stream"_a = 0,
          "Submits an operation. A device tensor's buffers are on device `device_id`, and `stream` is the "
          "caller's stream (the runtime's handle as an integer; 0 for the default stream): the operation "
          "reads the tensor after the work queued there so far, and waiting on the handle makes that "
          "stream wait for the result.")
      .def(
          "refuse",
          [](Engine& eng, int op_type, const std::string& name, int process_set, int64_t group_id, int group_size,
             const std::string& why) {
            if (op_type < 0 || op_type >= kOpTypeCount) Throw(Status::InvalidArgument("unknown op type"));
            eng.Refuse((OpType)op_type, name, process_set, group_id, group_size, why);
          },
          "op_type"_a, "name"_a, "process_set"_a, "group_id"_a, "group_size"_a, "why"_a,
          "Negotiates a group member this rank could not submit, so that the rest of its group runs and "
          "every rank's copy of it fails with `why` (nothing when the name is already in flight).")
      .def("add_process_set", &Engine::AddProcessSet, "ranks"_a)
      .def("remove_process_set", &Engine::RemoveProcessSet, "id"_a)
      .def("process_sets",
           [](Engine& e) {
             std::vector<std::pair<int32_t, std::vector<int32_t>>> out;
             for (auto& info : e.ProcessSets()) out.emplace_back(info.id, info.ranks);
             return out;
           })
      .def("process_set_size", &Engine::ProcessSetSize, "id"_a)
      .def("process_set_rank", &Engine::ProcessSetRank, "id"_a)
      .def("start_timeline", &Engine::StartTimeline, "path"_a, "mark_cycles"_a = false)
      .def("stop_timeline", &Engine::StopTimeline)
      // Autotuning: rank 0 proposes settings that every rank applies at the end of the same cycle.
      .def(
          "propose_settings",
          [](Engine& e, int64_t fusion_threshold, uint32_t cycle_time_us, bool hierarchical_allreduce,
             bool hierarchical_allgather) {
            TunedSettings s;
            s.fusion_threshold = fusion_threshold;
            s.cycle_time_us = cycle_time_us;
            s.hierarchical_allreduce = hierarchical_allreduce;
            s.hierarchical_allgather = hierarchical_allgather;
            return e.ProposeSettings(s);
          },
          "fusion_threshold"_a, "cycle_time_us"_a, "hierarchical_allreduce"_a, "hierarchical_allgather"_a)
      .def("current_settings",
           [](Engine& e) {
             const AppliedSettings a = e.CurrentSettings();
             nb::dict d;
             d["epoch"] = a.settings.epoch;
             d["cycle"] = a.cycle;
             d["fusion_threshold"] = a.settings.fusion_threshold;
             d["cycle_time_us"] = a.settings.cycle_time_us;
             d["hierarchical_allreduce"] = a.settings.hierarchical_allreduce;
             d["hierarchical_allgather"] = a.settings.hierarchical_allgather;
             return d;
           })
      // (steps so far, bytes moved before the last one began, when it began in steady-clock us)
      .def("last_step",
           [](const Engine& e) {
             const auto m = e.LastStep();
             return nb::make_tuple(m.steps, m.bytes, m.time_us);
           })
      .def_prop_ro("moved_bytes", &Engine::MovedBytes)
      .def("stats",
           [](const Engine& e) {
             nb::dict d;
             const NegotiationStats& n = e.negotiation_stats();
             const ExecutionStats& x = e.execution_stats();
             d["cycles"] = n.cycles.load();
             d["coordinator_rounds"] = n.coordinator_rounds.load();
             d["cache_hits"] = n.cache_hits.load();
             d["inline_reductions"] = n.inline_reductions.load();
             d["inline_broadcasts"] = n.inline_broadcasts.load();
             d["inline_allgathers"] = n.inline_allgathers.load();
             d["inline_alltoalls"] = n.inline_alltoalls.load();
             d["inline_space"] = n.inline_space.load();
             d["eager_sends"] = n.eager_sends.load();
             d["eager_drops"] = n.eager_drops.load();
             d["eager_record_cycles"] = n.eager_record_cycles.load();
             d["record_bytes_sent"] = n.record_bytes_sent.load();
             d["busy_cycles"] = n.busy_cycles.load();
             d["helped_cycles"] = n.helped_cycles.load();
             d["tensors"] = x.tensors.load();
             d["fused_batches"] = x.fused_batches.load();
             d["declined_buffer_calls"] = x.declined_buffer_calls.load();
             d["hierarchical_allreduces"] = x.hierarchical_allreduces.load();
             d["hierarchical_allgathers"] = x.hierarchical_allgathers.load();
             d["device_backend_calls"] = x.device_backend_calls.load();
             d["output_pool_reused"] = e.output_pool().reused();  // outputs that took a kept mapping
             d["output_pool_bytes"] = e.output_pool().kept_bytes();
             nb::dict calls;
             for (int t = 0; t < kOpTypeCount; ++t) calls[OpTypeName((OpType)t)] = x.backend_calls[t].load();
             d["backend_calls"] = calls;
             d["blocked_callers"] = e.blocked_callers();  // threads waiting in synchronize() right now
             return d;
           })
      // The job-end report's counters (diagnostics/job_stats.h), as plain data: times in microseconds.
      .def("job_stats", [](const Engine& e) { return JobStatsDict(e.job_stats().Take()); });
}

}  // namespace hvdcore::binding
