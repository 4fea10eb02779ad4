// CallbackStore: the engine's key-value store (backend/kv_store.h) served by Python callables.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "backend/kv_store.h"
#include "binding/bindings.h"
#include "core/common.h"

namespace hvdcore::binding {

// True while the interpreter tears down: taking the GIL then would abort the process.
inline bool PythonFinalizing() {
#if defined(Py_LIMITED_API) && Py_LIMITED_API < 0x030D0000
  // The stable-ABI build for 3.12 on declares no such probe (the limited API gains Py_IsFinalizing
  // in 3.13), yet every CPython exports one: 3.13 on Py_IsFinalizing, 3.12 _Py_IsFinalizing.
  using Probe = int (*)();
  static const Probe probe = [] {
    void* found = dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
    return reinterpret_cast<Probe>(found ? found : dlsym(RTLD_DEFAULT, "_Py_IsFinalizing"));
  }();
  return probe ? probe() != 0 : !nb::is_alive();
#elif PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// A store whose operations call back into Python (the launcher's rendezvous client). Used while
// connecting communicators and, once a job fails, to read the launcher's report of the lost rank
// (diagnostics/failure_report.h); never on the data path. Takes the GIL for each call, so an engine
// must be shut down with the GIL released (Engine.shutdown does), never only destroyed while a
// failure is being explained.
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

}  // namespace hvdcore::binding
