// Device: the device layer (horovod/hvd_device.h) from Python, for tests and for backends that
// take its table: device memory, streams, copies, and the simulated device's own report.
#include <nanobind/stl/string.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "binding/bindings.h"
#include "device/device.h"
#include "device/simulated_device.h"

namespace hvdcore::binding {

using namespace nb::literals;

namespace {

struct DeviceRef {
  const hvd_device_v1* table;
  void Check(int rc, const std::string& what) const {
    Status st = DeviceStatus(table, rc, what);
    if (!st.ok()) Throw(st);
  }
};

DeviceRef Open(const std::string& kind) {
  std::string error;
  const hvd_device_v1* d = DeviceNamed(kind, &error);
  if (!d) Throw(Status::InvalidArgument(error));
  return {d};
}

hvd_stream_t AsStream(uintptr_t s) { return reinterpret_cast<hvd_stream_t>(s); }

}  // namespace

void BindDevice(nb::module_& m) {
  nb::class_<DeviceRef>(m, "Device", "A device layer's table: 'cuda' or 'simulated' (HOROVOD_DEVICE).")
      .def(
          "__init__", [](DeviceRef* self, const std::string& kind) { new (self) DeviceRef(Open(kind)); }, "kind"_a)
      .def_prop_ro("name", [](const DeviceRef& d) { return std::string(d.table->name); })
      .def_prop_ro("count",
                   [](const DeviceRef& d) {
                     int32_t n = 0;
                     d.Check(d.table->device_count(&n), "counting devices");
                     return n;
                   })
      .def(
          "capsule",
          [](const DeviceRef& d) { return nb::capsule(static_cast<const void*>(d.table), "horovod.hvd_device_v1"); },
          "The hvd_device_v1 table, in a PyCapsule named 'horovod.hvd_device_v1' (never freed).")
      .def(
          "alloc",
          [](const DeviceRef& d, int32_t device_id, size_t nbytes) {
            void* p = nullptr;
            d.Check(d.table->device_alloc(device_id, nbytes, &p), "allocating " + std::to_string(nbytes) + " bytes");
            return reinterpret_cast<uintptr_t>(p);
          },
          "device_id"_a, "nbytes"_a)
      .def(
          "free",
          [](const DeviceRef& d, uintptr_t p) {
            int rc;
            {
              nb::gil_scoped_release nogil;  // waits for queued work that touches it, as cudaFree does
              rc = d.table->device_free(reinterpret_cast<void*>(p));
            }
            d.Check(rc, "device_free");
          },
          "address"_a)
      .def(
          "create_stream",
          [](const DeviceRef& d, int32_t device_id) {
            hvd_stream_t s = nullptr;
            d.Check(d.table->stream_create(device_id, &s), "creating a stream");
            return reinterpret_cast<uintptr_t>(s);
          },
          "device_id"_a)
      .def(
          "destroy_stream",
          [](const DeviceRef& d, uintptr_t s) { d.Check(d.table->stream_destroy(AsStream(s)), "destroying a stream"); },
          "stream"_a)
      .def(
          "synchronize",
          [](const DeviceRef& d, uintptr_t s) {
            int rc;
            {
              nb::gil_scoped_release nogil;
              rc = d.table->stream_synchronize(AsStream(s));
            }
            d.Check(rc, "synchronizing a stream");
          },
          "stream"_a = 0)
      .def(
          "upload",
          [](const DeviceRef& d, uintptr_t dst, nb::bytes data, uintptr_t s) {
            // Queued after the stream's earlier work; the host copy lives until the copy has run.
            void* host = std::malloc(std::max<size_t>(data.size(), 1));
            std::memcpy(host, data.c_str(), data.size());
            d.Check(d.table->memcpy_async(reinterpret_cast<void*>(dst), host, data.size(), HVD_COPY_HOST_TO_DEVICE,
                                          AsStream(s)),
                    "uploading " + std::to_string(data.size()) + " bytes");
            d.Check(d.table->launch_host_fn(AsStream(s), [](void* p) { std::free(p); }, host), "queueing a free");
          },
          "address"_a, "data"_a, "stream"_a = 0, "Copies `data` to device memory at `address`, queued on `stream`.")
      .def(
          "download",
          [](const DeviceRef& d, uintptr_t src, size_t nbytes, uintptr_t s) {
            std::string out(nbytes, '\0');
            int rc = d.table->memcpy_async(out.data(), reinterpret_cast<void*>(src), nbytes, HVD_COPY_DEVICE_TO_HOST,
                                           AsStream(s));
            d.Check(rc, "downloading " + std::to_string(nbytes) + " bytes");
            {
              nb::gil_scoped_release nogil;
              rc = d.table->stream_synchronize(AsStream(s));
            }
            d.Check(rc, "downloading " + std::to_string(nbytes) + " bytes");
            return nb::bytes(out.data(), out.size());
          },
          "address"_a, "nbytes"_a, "stream"_a = 0,
          "The bytes at device `address`, read after `stream`'s earlier work (waits for it).")
      .def(
          "delay",
          [](const DeviceRef& d, uintptr_t s, double seconds) {
            auto* us = new int64_t((int64_t)(seconds * 1e6));
            d.Check(d.table->launch_host_fn(
                        AsStream(s),
                        [](void* p) {
                          auto* n = static_cast<int64_t*>(p);
                          std::this_thread::sleep_for(std::chrono::microseconds(*n));
                          delete n;
                        },
                        us),
                    "queueing a delay");
          },
          "stream"_a, "seconds"_a, "Keeps `stream` busy for a while, as a long kernel would.");

  m.def("simulated_device_state", [] {
    SimulatedDeviceReport r = SimulatedDeviceState();
    nb::dict d;
    nb::list races;
    for (const std::string& race : r.races) races.append(race);
    d["races"] = races;
    d["allocations"] = r.allocations;
    d["streams"] = r.streams;
    return d;
  });
  m.def("simulated_device_clear_races", &SimulatedDeviceClearRaces);
}

}  // namespace hvdcore::binding
