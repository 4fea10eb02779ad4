// Failures cross into Python as the exception classes horovod.common registers for each status code.
#include <exception>

#include "binding/bindings.h"
#include "core/common.h"

namespace hvdcore::binding {

using namespace nb::literals;

namespace {

// Python exception classes for each status code, registered by horovod.common at import.
nb::object g_exception_types[4];

}  // namespace

void BindExceptions(nb::module_& m) {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      nb::object type = g_exception_types[(int)e.status.code()];
      PyObject* t = type.is_valid() ? type.ptr() : PyExc_RuntimeError;
      if (!e.refusal_queued) {
        PyErr_SetString(t, e.status.message().c_str());
        return;
      }
      // The exception says so (collectives.py then does not refuse the member again).
      PyObject* error = PyObject_CallFunction(t, "s", e.status.message().c_str());
      if (error && PyObject_SetAttrString(error, "refusal_queued", Py_True) == 0) PyErr_SetObject(t, error);
      Py_XDECREF(error);
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
}

}  // namespace hvdcore::binding
