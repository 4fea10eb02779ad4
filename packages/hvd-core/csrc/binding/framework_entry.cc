// The C entry point for native framework code (horovod/hvd_framework.h): submissions from
// framework kernels reach the engine that horovod.common's init() published here, and complete
// through a C callback on the thread running the engine's cycle, with no Python and no waiting
// thread on the way.
#include <nanobind/nanobind.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "binding/bindings.h"
#include "engine/engine.h"
#include "horovod/hvd_framework.h"

namespace hvdcore::binding {

using namespace nb::literals;

namespace {

// The engine of the process's Horovod instance. Submissions come from framework threads, without
// the GIL, so the pointer is guarded by its own mutex; the Python object that owns the engine is
// held (a reference taken and dropped with the GIL) for as long as it is published, so the engine
// cannot be destroyed under a submission.
std::mutex g_engine_mu;
Engine* g_engine = nullptr;
PyObject* g_engine_owner = nullptr;  // never released at interpreter exit: shutdown() unpublishes it

void CopyMessage(const std::string& message, char* error, size_t error_size) {
  if (!error || error_size == 0) return;
  size_t n = std::min(message.size(), error_size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

std::unique_ptr<TensorEntry> EntryOf(const hvd_fw_request& r) {
  if (r.op > HVD_FW_JOIN) Throw(Status::InvalidArgument("unknown operation " + std::to_string(r.op)));
  if (r.reduce_op >= kReduceOpCount) Throw(Status::InvalidArgument("unknown reduce op " + std::to_string(r.reduce_op)));
  auto e = std::make_unique<TensorEntry>();
  e->type = (OpType)r.op;
  e->name = r.name ? r.name : "";
  e->process_set_id = r.process_set_id;
  if (e->type == OpType::kBarrier || e->type == OpType::kJoin) return e;
  if (r.dtype >= HVD_DTYPE_COUNT) Throw(Status::InvalidArgument("tensor '" + e->name + "': unknown dtype code"));
  if (r.ndim < 0 || (r.ndim > 0 && !r.shape))
    Throw(Status::InvalidArgument("tensor '" + e->name + "': a shape of " + std::to_string(r.ndim) + " dimensions"));
  if (r.device_kind != HVD_DEVICE_CPU)
    Throw(Status::InvalidArgument("tensor '" + e->name + "': only host memory can be submitted natively"));
  TensorView v;
  v.dtype = (hvd_dtype)r.dtype;
  v.shape.assign(r.shape, r.shape + r.ndim);
  v.device_kind = r.device_kind;
  v.data = const_cast<void*>(r.input);
  e->input = v;
  if (r.output) {
    e->output = v;
    e->output.data = r.output;
  }
  e->op = (ReduceOp)r.reduce_op;
  e->root = r.root_rank;
  e->prescale = r.prescale;
  e->postscale = r.postscale;
  if (r.splits) e->splits.assign(r.splits, r.splits + std::max(r.num_splits, 0));
  e->group_id = r.group_id;
  e->group_size = r.group_size;
  return e;
}

void ReportCompletion(hvd_fw_done_fn done, void* user_data, HandleState& h) {
  hvd_fw_result result{};
  const Status& st = h.status();
  result.status = (uint32_t)st.code();  // StatusCode and hvd_fw_status share their numbering
  result.message = st.message().c_str();
  if (h.output) {
    result.output = h.output->data();
    result.output_ndim = (int32_t)h.output_shape.size();
    result.output_shape = h.output_shape.data();
  }
  result.received_splits = h.received_splits.data();
  result.num_received_splits = (int32_t)h.received_splits.size();
  result.value = h.value;
  done(user_data, &result);
}

// A refused member of a group is negotiated all the same (Engine::Refuse), or its partners, already
// submitted by other kernels, would wait for it forever.
void RefuseInGroup(const hvd_fw_request* r, const Status& why) {
  if (!r || r->group_id < 0 || !r->name || r->op > HVD_FW_REDUCESCATTER) return;
  std::lock_guard<std::mutex> lk(g_engine_mu);
  if (g_engine) g_engine->Refuse((OpType)r->op, r->name, r->process_set_id, r->group_id, r->group_size, why.message());
}

uint32_t Submit(const hvd_fw_request* request, hvd_fw_done_fn done, void* user_data, char* error, size_t error_size) {
  try {
    if (!request || !done) Throw(Status::InvalidArgument("submit needs a request and a done callback"));
    std::unique_ptr<TensorEntry> entry = EntryOf(*request);
    std::lock_guard<std::mutex> lk(g_engine_mu);
    if (!g_engine) Throw(Status::Aborted("Horovod is not running: call hvd.init() first"));
    g_engine->Enqueue(std::move(entry), [done, user_data](HandleState& h) { ReportCompletion(done, user_data, h); });
    return HVD_FW_OK;
  } catch (const StatusError& e) {
    if (!e.refusal_queued) RefuseInGroup(request, e.status);
    CopyMessage(e.status.message(), error, error_size);
    return (uint32_t)e.status.code();
  } catch (const std::exception& e) {  // out of memory, say: never across the C boundary
    CopyMessage(e.what(), error, error_size);
    return HVD_FW_ABORTED;
  }
}

int32_t ProcessSetRank(int32_t id) {
  std::lock_guard<std::mutex> lk(g_engine_mu);
  return g_engine ? g_engine->ProcessSetRank(id) : -1;
}

int32_t ProcessSetSize(int32_t id) {
  std::lock_guard<std::mutex> lk(g_engine_mu);
  return g_engine ? g_engine->ProcessSetSize(id) : -1;
}

const hvd_framework_v1 kFrameworkV1 = {
    HVD_FRAMEWORK_API_VERSION, sizeof(hvd_framework_v1), &Submit, &ProcessSetRank, &ProcessSetSize,
};

static_assert((int)StatusCode::kInvalidArgument == HVD_FW_INVALID_ARGUMENT &&
                  (int)StatusCode::kMismatch == HVD_FW_MISMATCH && (int)StatusCode::kAborted == HVD_FW_ABORTED,
              "hvd_fw_status follows StatusCode");
static_assert((int)OpType::kAllreduce == HVD_FW_ALLREDUCE && (int)OpType::kReducescatter == HVD_FW_REDUCESCATTER &&
                  (int)OpType::kJoin == HVD_FW_JOIN,
              "hvd_fw_op follows OpType");

}  // namespace

void BindFrameworkEntry(nb::module_& m) {
  m.def(
      "framework_entry", [] { return nb::capsule(&kFrameworkV1, HVD_FRAMEWORK_V1_CAPSULE); },
      "The C entry point for native framework code (horovod/hvd_framework.h), as a capsule.");
  m.def(
      "publish_engine",
      [](nb::object engine) {
        Engine* published = engine.is_none() ? nullptr : nb::cast<Engine*>(engine);
        {
          std::lock_guard<std::mutex> lk(g_engine_mu);
          g_engine = published;
        }
        PyObject* previous = g_engine_owner;
        g_engine_owner = published ? engine.release().ptr() : nullptr;
        Py_XDECREF(previous);
      },
      "engine"_a.none(), nb::sig("def publish_engine(engine: Engine | None) -> None"),
      "Makes `engine` (kept alive meanwhile) the one framework_entry() submits to; None: no engine.");
}

}  // namespace hvdcore::binding
