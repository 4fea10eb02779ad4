// horovod.common._native._core: the Python binding of the engine (private; horovod.common wraps it).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <variant>

#include "engine.h"
#include "horovod/hvd_reduce.hpp"
#include "output_buffer.h"

namespace nb = nanobind;
using namespace nb::literals;
using namespace hvdcore;

// Contiguous host memory given as (address, byte count): how framework adapters hand over CPU tensors,
// because converting a tensor through DLPack (torch's __dlpack__) costs more than the rest of a
// submission. The caller vouches that the memory is host memory, contiguous and alive until completion
// (horovod.common's Context keeps the tensor); the byte count is still checked against shape x dtype.
struct HostSpan {
  uintptr_t address;
  size_t nbytes;
};

// Only an exact tuple of two ints is a HostSpan: nanobind's pair caster would also take any
// 2-element sequence, such as a 2-element array meant as a DLPack buffer.
namespace nanobind::detail {
template <>
struct type_caster<HostSpan> {
  NB_TYPE_CASTER(HostSpan, const_name("tuple[int, int]"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    PyObject* o = src.ptr();
    if (!PyTuple_CheckExact(o) || PyTuple_GET_SIZE(o) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(o, 0)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(o, 1))) {
      return false;
    }
    value.address = (uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(o, 0));
    value.nbytes = (size_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(o, 1));
    if (PyErr_Occurred()) {  // negative or too large
      PyErr_Clear();
      return false;
    }
    return true;
  }
  static handle from_cpp(const HostSpan& v, rv_policy, cleanup_list*) noexcept {
    return Py_BuildValue("(KK)", (unsigned long long)v.address, (unsigned long long)v.nbytes);
  }
};
}  // namespace nanobind::detail

namespace {

// Python exception classes for each status code, registered by horovod.common at import.
nb::object g_exception_types[4];

[[noreturn]] void Throw(const Status& s) { throw StatusError{s}; }

// True while the interpreter tears down: taking the GIL then would abort the process.
bool PythonFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// A store whose operations call back into Python (the launcher's rendezvous client). Used while
// connecting communicators and, once a job fails, to read the launcher's report of the lost rank
// (failure_report.h); never on the data path. Takes the GIL for each call, so an engine must be
// shut down with the GIL released (Engine.shutdown does), never only destroyed while a failure is
// being explained.
class CallbackStore : public KVStore {
 public:
  CallbackStore(nb::callable set, nb::callable get) : set_(std::move(set)), get_(std::move(get)) {}
  ~CallbackStore() override {
    if (PythonFinalizing()) {  // leak the callables rather than abort the process
      set_.release();
      get_.release();
      return;
    }
    nb::gil_scoped_acquire gil;
    set_.reset();
    get_.reset();
  }
  Status Set(const std::string& key, const std::vector<uint8_t>& value) override {
    if (PythonFinalizing()) return Status::Aborted("the Python interpreter is shutting down");
    nb::gil_scoped_acquire gil;
    try {
      set_(key, nb::bytes((const char*)value.data(), value.size()));
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Aborted(std::string("store set failed: ") + e.what());
    }
  }
  Status Get(const std::string& key, int64_t timeout_ms, std::vector<uint8_t>* value) override {
    if (PythonFinalizing()) return Status::Aborted("the Python interpreter is shutting down");
    nb::gil_scoped_acquire gil;
    try {
      nb::object result = get_(key, timeout_ms / 1000.0);
      if (result.is_none()) return Status::Aborted("timed out waiting for store key '" + key + "'");
      nb::bytes b = nb::cast<nb::bytes>(result);
      const uint8_t* p = (const uint8_t*)b.c_str();
      value->assign(p, p + b.size());
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Aborted(std::string("store get failed: ") + e.what());
    }
  }

 private:
  nb::object set_, get_;
};

nb::dlpack::dtype DlpackDtype(hvd_dtype d) {
  switch (d) {
    case HVD_DTYPE_UINT8: return nb::dtype<uint8_t>();
    case HVD_DTYPE_INT8: return nb::dtype<int8_t>();
    case HVD_DTYPE_INT16: return nb::dtype<int16_t>();
    case HVD_DTYPE_INT32: return nb::dtype<int32_t>();
    case HVD_DTYPE_INT64: return nb::dtype<int64_t>();
    case HVD_DTYPE_FLOAT16: return {(uint8_t)nb::dlpack::dtype_code::Float, 16, 1};
    case HVD_DTYPE_BFLOAT16: return {(uint8_t)nb::dlpack::dtype_code::Bfloat, 16, 1};
    case HVD_DTYPE_FLOAT32: return nb::dtype<float>();
    case HVD_DTYPE_FLOAT64: return nb::dtype<double>();
    case HVD_DTYPE_BOOL: return nb::dtype<bool>();
  }
  return nb::dtype<uint8_t>();
}

using AnyArray = nb::ndarray<nb::ro>;
// What a caller's buffer may be: a DLPack-capable array (numpy, CUDA tensors, ...) or a host span.
using CallerBuffer = std::variant<HostSpan, AnyArray>;

// The memory of a DLPack array, checked to be contiguous (and in host memory for a CPU op).
std::pair<void*, size_t> ArrayMemory(const char* what, const std::string& name, const AnyArray& a,
                                     uint32_t device_kind) {
  if (a.device_type() != nb::device::cpu::value && device_kind == HVD_DEVICE_CPU) {
    Throw(Status::InvalidArgument("tensor '" + name + "': the " + what + " buffer is not in host memory"));
  }
  int64_t expected = 1;  // nanobind strides count elements
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) {
      Throw(Status::InvalidArgument("tensor '" + name + "': the " + what + " buffer is not contiguous"));
    }
    expected *= (int64_t)a.shape(i);
  }
  return {const_cast<void*>(a.data()), a.nbytes()};
}

// A view of a caller's buffer: contiguous host memory holding exactly shape x dtype.
TensorView MakeView(const char* what, const std::string& name, const std::optional<CallerBuffer>& buffer, int dtype,
                    const std::vector<int64_t>& shape, uint32_t device_kind) {
  TensorView v;
  if (dtype < 0 || dtype >= HVD_DTYPE_COUNT) Throw(Status::InvalidArgument("tensor '" + name + "': unknown dtype code"));
  v.dtype = (hvd_dtype)dtype;
  v.shape = shape;
  v.device_kind = device_kind;
  if (!buffer) return v;
  const HostSpan* span = std::get_if<HostSpan>(&*buffer);
  if (span && device_kind != HVD_DEVICE_CPU) {  // an address alone cannot say which device it is on
    Throw(Status::InvalidArgument("tensor '" + name + "': the " + what +
                                  " buffer is given as a host address, but the operation is not on the CPU"));
  }
  auto [data, nbytes] = span ? std::pair<void*, size_t>{reinterpret_cast<void*>(span->address), span->nbytes}
                             : ArrayMemory(what, name, std::get<AnyArray>(*buffer), device_kind);
  v.data = data;
  size_t want = (size_t)v.num_elements() * hvd::dtype_size(v.dtype);
  if (nbytes != want) {
    Throw(Status::InvalidArgument("tensor '" + name + "': the " + what + " buffer holds " + std::to_string(nbytes) +
                                  " bytes, but shape " + ShapeString(shape) + " of " + hvd::dtype_name(v.dtype) +
                                  " needs " + std::to_string(want)));
  }
  return v;
}

nb::object OutputOf(HandleState& h, bool raw) {
  if (!h.output) return nb::none();
  auto* keep = new std::shared_ptr<Buffer>(h.output);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<Buffer>*>(p); });
  if (raw) {
    size_t n = h.output->bytes();
    return nb::cast(nb::ndarray<nb::numpy, uint8_t>(h.output->data(), 1, &n, owner));
  }
  std::vector<size_t> shape(h.output_shape.begin(), h.output_shape.end());
  return nb::cast(nb::ndarray<>(h.output->data(), shape.size(), shape.data(), owner, nullptr,
                                DlpackDtype(h.output_dtype)));
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "The hvd engine (private: use horovod.common).";
  m.attr("ABI_VERSION") = HVD_BACKEND_ABI_VERSION;
  // The numbering of ops and dtypes, exported so Python never restates it.
  for (int t = 0; t < kOpTypeCount; ++t) {
    std::string name = std::string("OP_") + OpTypeName((OpType)t);
    for (char& c : name) c = (char)toupper(c);
    m.attr(name.c_str()) = t;
  }
  for (int d = 0; d < HVD_DTYPE_COUNT; ++d) {
    std::string name = std::string("DTYPE_") + hvd::dtype_name((hvd_dtype)d);
    for (char& c : name) c = (char)toupper(c);
    m.attr(name.c_str()) = d;
  }
  m.attr("DEVICE_CPU") = HVD_DEVICE_CPU;
  m.attr("DEVICE_CUDA") = HVD_DEVICE_CUDA;
  // Decoders of the negotiation wire format, exposed for the fuzz tests.
  m.def("decode_requests", [](nb::bytes data) {
    std::vector<Request> out;
    Status s = DecodeRequests((const uint8_t*)data.c_str(), data.size(), &out);
    if (!s.ok()) Throw(s);
    return out.size();
  });
  m.def("decode_responses", [](nb::bytes data) {
    ResponseList out;
    Status s = DecodeResponseList((const uint8_t*)data.c_str(), data.size(), &out);
    if (!s.ok()) Throw(s);
    return out.responses.size();
  });
  m.def("encode_request", [](const std::string& name, int op_type, int dtype, std::vector<int64_t> shape) {
    Request r;
    r.name = name;
    r.type = (OpType)op_type;
    r.dtype = (hvd_dtype)dtype;
    r.shape = std::move(shape);
    std::vector<uint8_t> out;
    EncodeRequests({r}, &out);
    return nb::bytes((const char*)out.data(), out.size());
  });

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      nb::object type = g_exception_types[(int)e.status.code()];
      PyObject* t = type.is_valid() ? type.ptr() : PyExc_RuntimeError;
      PyErr_SetString(t, e.status.message().c_str());
    }
  });
  m.def(
      "set_exception_types",
      [](nb::object invalid_argument, nb::object mismatch, nb::object aborted) {
        g_exception_types[(int)StatusCode::kInvalidArgument] = invalid_argument;
        g_exception_types[(int)StatusCode::kMismatch] = mismatch;
        g_exception_types[(int)StatusCode::kAborted] = aborted;
      },
      "invalid_argument"_a, "mismatch"_a, "aborted"_a);

  nb::class_<Backend>(m, "Backend")
      .def_static(
          "load",
          [](const std::string& path) {
            std::shared_ptr<Backend> b;
            Status s = Backend::Load(path, &b);
            if (!s.ok()) Throw(s);
            return b;
          },
          "path"_a)
      .def_prop_ro("name", &Backend::name)
      .def_prop_ro("path", &Backend::path)
      .def_prop_ro("version", [](const Backend& b) { return std::string(b.api()->version ? b.api()->version : ""); })
      .def_prop_ro(
          "extensions",
          [](const Backend& b) {
            std::vector<std::string> found;
            if (b.has_allreduce_buffers()) found.push_back("allreduce_buffers");
            return found;
          },
          "The optional functions of hvd_backend_ext_v1 the backend implements (and the engine uses).")
      .def_prop_ro("device_kinds", [](const Backend& b) { return b.api()->device_kinds; })
      .def_prop_ro("capabilities", [](const Backend& b) { return b.api()->capabilities; });

  nb::class_<KVStore>(m, "KVStore");
  nb::class_<InMemoryStore, KVStore>(m, "InMemoryStore")
      .def(nb::init<>())
      .def("set", [](InMemoryStore& s, const std::string& k, nb::bytes v) {
        const uint8_t* p = (const uint8_t*)v.c_str();
        s.Set(k, std::vector<uint8_t>(p, p + v.size()));
      })
      .def("get", [](InMemoryStore& s, const std::string& k, double timeout_s) -> nb::object {
        std::vector<uint8_t> v;
        Status st;
        {
          nb::gil_scoped_release nogil;
          st = s.Get(k, (int64_t)(timeout_s * 1000), &v);
        }
        if (!st.ok()) return nb::none();
        return nb::bytes((const char*)v.data(), v.size());
      })
      .def("__len__", &InMemoryStore::size);
  nb::class_<CallbackStore, KVStore>(m, "CallbackStore").def(nb::init<nb::callable, nb::callable>(), "set"_a, "get"_a);

  nb::class_<EngineConfig>(m, "EngineConfig")
      .def(nb::init<>())
      .def_rw("rank", &EngineConfig::rank)
      .def_rw("size", &EngineConfig::size)
      .def_rw("key_prefix", &EngineConfig::key_prefix)
      .def_rw("fusion_threshold", &EngineConfig::fusion_threshold)
      .def_rw("cycle_time_ms", &EngineConfig::cycle_time_ms)
      .def_rw("cache_capacity", &EngineConfig::cache_capacity)
      .def_rw("inline_bytes", &EngineConfig::inline_bytes)
      .def_rw("stall_check_enabled", &EngineConfig::stall_check_enabled)
      .def_rw("stall_check_s", &EngineConfig::stall_check_s)
      .def_rw("stall_shutdown_s", &EngineConfig::stall_shutdown_s)
      .def_rw("timeline_path", &EngineConfig::timeline_path)
      .def_rw("timeline_mark_cycles", &EngineConfig::timeline_mark_cycles)
      .def_rw("log_level", &EngineConfig::log_level)
      .def_rw("log_hide_time", &EngineConfig::log_hide_time)
      .def_rw("timeout_ms", &EngineConfig::timeout_ms)
      .def_rw("dynamic_process_sets", &EngineConfig::dynamic_process_sets)
      .def_rw("process_sets", &EngineConfig::process_sets)
      .def_rw("failure_report_key", &EngineConfig::failure_report_key)
      .def_rw("failure_report_wait_ms", &EngineConfig::failure_report_wait_ms);

  nb::class_<HandleState>(m, "Handle")
      .def("poll", &HandleState::poll, "True once the operation has completed; never blocks.")
      .def(
          "wait",
          [](HandleState& h) {
            if (!h.poll()) {  // a completed op (the common case in synchronize) skips the GIL round trip
              nb::gil_scoped_release nogil;
              h.Wait();
            }
            if (!h.status().ok()) Throw(h.status());
          },
          "Blocks (without the GIL) until completion; raises the operation's error.")
      .def("output", &OutputOf, "raw"_a = false,
           "The engine-allocated result (DLPack-capable array), or None; raw=True gives its bytes as uint8.")
      .def_prop_ro("output_shape", [](const HandleState& h) { return h.output_shape; })
      .def_prop_ro("received_splits", [](const HandleState& h) { return h.received_splits; })
      .def_prop_ro("value", [](const HandleState& h) { return h.value; });

  nb::class_<Engine>(m, "Engine")
      .def(nb::init<EngineConfig, std::shared_ptr<Backend>, std::shared_ptr<KVStore>>(), "config"_a, "backend"_a,
           "store"_a)
      .def("start", &Engine::Start, nb::call_guard<nb::gil_scoped_release>())
      .def("shutdown", &Engine::Shutdown, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("running", &Engine::running)
      .def_prop_ro("rank", [](const Engine& e) { return e.config().rank; })
      .def_prop_ro("size", [](const Engine& e) { return e.config().size; })
      .def_prop_ro("backend_name", [](const Engine& e) { return e.backend().name(); })
      .def(
          "enqueue",
          [](Engine& eng, int op_type, const std::string& name, std::optional<CallerBuffer> input, int dtype,
             std::vector<int64_t> shape, std::optional<CallerBuffer> output, int op, int root, double prescale,
             double postscale, int process_set, std::optional<std::vector<int64_t>> splits, int64_t group_id,
             int group_size, uint32_t device_kind, bool inplace) {
            if (op_type < 0 || op_type >= kOpTypeCount) Throw(Status::InvalidArgument("unknown op type"));
            if (op < 0 || op >= kReduceOpCount) Throw(Status::InvalidArgument("unknown reduce op " + std::to_string(op)));
            auto e = std::make_unique<TensorEntry>();
            e->type = (OpType)op_type;
            e->name = name;
            e->input = MakeView("input", name, input, dtype, shape, device_kind);
            if (inplace) {
              e->output = e->input;  // the result overwrites the input: one buffer crosses, not two
            } else if (output) {
              e->output = MakeView("output", name, output, dtype, shape, device_kind);
              // hvd's frameworks allocate a separate output just before submitting, and the
              // collective writes it first: in huge pages, a large one takes a fraction of the
              // page faults' time (output_buffer.h). Other callers' outputs get the same advice,
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
          "device_kind"_a = (uint32_t)HVD_DEVICE_CPU, "inplace"_a = false)
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
      .def("stats", [](const Engine& e) {
        nb::dict d;
        const NegotiationStats& n = e.negotiation_stats();
        const ExecutionStats& x = e.execution_stats();
        d["cycles"] = n.cycles.load();
        d["coordinator_rounds"] = n.coordinator_rounds.load();
        d["cache_hits"] = n.cache_hits.load();
        d["inline_reductions"] = n.inline_reductions.load();
        d["tensors"] = x.tensors.load();
        d["fused_batches"] = x.fused_batches.load();
        d["declined_buffer_calls"] = x.declined_buffer_calls.load();
        nb::dict calls;
        for (int t = 0; t < kOpTypeCount; ++t) calls[OpTypeName((OpType)t)] = x.backend_calls[t].load();
        d["backend_calls"] = calls;
        d["blocked_callers"] = e.blocked_callers();  // threads waiting in synchronize() right now
        return d;
      });
}
