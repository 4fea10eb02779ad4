// The parts of horovod.common._native._core, each bound in its own file of this directory and
// called in turn by module.cc.
#pragma once

#include <nanobind/nanobind.h>

#include "core/common.h"

namespace hvdcore::binding {

namespace nb = nanobind;

// Raised in Python as the exception horovod.common registered for the status's code (exceptions.cc).
[[noreturn]] inline void Throw(const Status& s) { throw StatusError{s}; }

void BindConstants(nb::module_& m);     // ABI_VERSION and the numbering of ops, dtypes, devices
void BindExceptions(nb::module_& m);    // set_exception_types, and StatusError raised as those
void BindBackend(nb::module_& m);       // Backend
void BindStores(nb::module_& m);        // KVStore, InMemoryStore, CallbackStore
void BindEngineConfig(nb::module_& m);  // EngineConfig
void BindHandle(nb::module_& m);        // Handle
void BindEngine(nb::module_& m);        // Engine
void BindDevice(nb::module_& m);       // Device, the simulated device's report
void BindFrameworkEntry(nb::module_& m);  // framework_entry, publish_engine (horovod/hvd_framework.h)

}  // namespace hvdcore::binding
