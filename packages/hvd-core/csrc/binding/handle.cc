// Handle: a submitted operation's completion, and its result handed to Python without a copy.
#include <nanobind/ndarray.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "binding/bindings.h"
#include "core/handle.h"
#include "core/output_buffer.h"
#include "device/device.h"
#include "horovod/hvd_backend.h"
#include "horovod/hvd_reduce.hpp"

namespace hvdcore::binding {

using namespace nb::literals;

namespace {

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

// How often a waiting caller lets Python handle pending signals: Ctrl-C and alarms reach a rank
// blocked on a peer within this, at the cost of one GIL round trip per interval.
constexpr std::chrono::milliseconds kSignalCheckInterval{50};
// Only the main thread runs Python's signal handlers: other threads wait as before, without
// taking the GIL every interval (which slowed a rank's main thread submitting beside them).
constexpr std::chrono::hours kNoSignalChecks{1};
unsigned long g_main_thread = 0;  // set when the module is imported, on the main thread

nb::object OutputOf(HandleState& h, bool raw) {
  if (h.output_device) {  // a DLPack array on the device, owning the memory through the handle's share
    auto* keep = new std::shared_ptr<void>(h.output_device);
    nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<void>*>(p); });
    std::vector<size_t> shape(h.output_shape.begin(), h.output_shape.end());
    return nb::cast(nb::ndarray<>(h.output_device.get(), shape.size(), shape.data(), owner, nullptr,
                                  DlpackDtype(h.output_dtype), nb::device::cuda::value, h.device->device_id));
  }
  if (!h.output) return nb::none();
  auto* keep = new std::shared_ptr<Buffer>(h.output);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<Buffer>*>(p); });
  if (raw) {
    size_t n = h.output->bytes();
    return nb::cast(nb::ndarray<nb::numpy, uint8_t>(h.output->data(), 1, &n, owner));
  }
  std::vector<size_t> shape(h.output_shape.begin(), h.output_shape.end());
  return nb::cast(
      nb::ndarray<>(h.output->data(), shape.size(), shape.data(), owner, nullptr, DlpackDtype(h.output_dtype)));
}

}  // namespace

void BindHandle(nb::module_& m) {
  g_main_thread = PyThread_get_thread_ident();
  nb::class_<HandleState>(m, "Handle")
      .def("poll", &HandleState::poll, "True once the operation has completed; never blocks.")
      .def(
          "wait",
          [](HandleState& h) {
            if (!h.poll()) {  // a completed op (the common case in synchronize) skips the GIL round trip
              bool done;
              const bool main_thread = PyThread_get_thread_ident() == g_main_thread;
              {
                nb::gil_scoped_release nogil;
                done = h.WaitInterruptibly(main_thread ? kSignalCheckInterval : kNoSignalChecks, [] {
                  nb::gil_scoped_acquire gil;
                  return PyErr_CheckSignals() != 0;  // a handler raised: its exception is set
                });
              }
              if (!done) throw nb::python_error();  // the operation goes on; the handle stays valid
            }
            if (!h.status().ok()) Throw(h.status());
            if (h.device && h.device->done) {  // the caller's stream goes on after the results
              Status st = DeviceStatus(h.device->device,
                                       h.device->device->stream_wait_event(h.caller_stream, h.device->done.get()),
                                       "ordering the caller's stream after the operation");
              if (!st.ok()) Throw(st);
            }
          },
          "Blocks (without the GIL) until completion; raises the operation's error, or what a signal "
          "handler raised meanwhile (Ctrl-C: KeyboardInterrupt), leaving the operation running.")
      .def("output", &OutputOf, "raw"_a = false,
           "The engine-allocated result (DLPack-capable array), or None; raw=True gives its bytes as uint8.")
      .def_prop_ro(
          "output_device_address",
          [](const HandleState& h) -> nb::object {
            if (!h.output_device) return nb::none();
            return nb::int_(reinterpret_cast<uintptr_t>(h.output_device.get()));
          },
          "The device address of an engine-allocated result on a device, or None.")
      .def_prop_ro("output_shape", [](const HandleState& h) { return h.output_shape; })
      .def_prop_ro("received_splits", [](const HandleState& h) { return h.received_splits; })
      .def_prop_ro("value", [](const HandleState& h) { return h.value; });
}

}  // namespace hvdcore::binding
