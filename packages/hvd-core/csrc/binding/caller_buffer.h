// What a caller may hand over as a tensor's memory, and the checks that turn it into a TensorView.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "binding/bindings.h"
#include "core/common.h"
#include "horovod/hvd_reduce.hpp"

namespace hvdcore::binding {

// Contiguous host memory given as (address, byte count): how framework adapters hand over CPU tensors,
// because converting a tensor through DLPack (torch's __dlpack__) costs more than the rest of a
// submission. The caller vouches that the memory is host memory, contiguous and alive until completion
// (horovod.common's Context keeps the tensor); the byte count is still checked against shape x dtype.
struct HostSpan {
  uintptr_t address;
  size_t nbytes;
};

}  // namespace hvdcore::binding

// Only an exact tuple of two ints is a HostSpan: nanobind's pair caster would also take any
// 2-element sequence, such as a 2-element array meant as a DLPack buffer.
namespace nanobind::detail {
template <>
struct type_caster<hvdcore::binding::HostSpan> {
  NB_TYPE_CASTER(hvdcore::binding::HostSpan, const_name("tuple[int, int]"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    PyObject* o = src.ptr();
    if (!PyTuple_CheckExact(o) || NB_TUPLE_GET_SIZE(o) != 2 || !PyLong_CheckExact(NB_TUPLE_GET_ITEM(o, 0)) ||
        !PyLong_CheckExact(NB_TUPLE_GET_ITEM(o, 1))) {
      return false;
    }
    value.address = (uintptr_t)PyLong_AsUnsignedLongLong(NB_TUPLE_GET_ITEM(o, 0));
    value.nbytes = (size_t)PyLong_AsUnsignedLongLong(NB_TUPLE_GET_ITEM(o, 1));
    if (PyErr_Occurred()) {  // negative or too large
      PyErr_Clear();
      return false;
    }
    return true;
  }
  static handle from_cpp(const hvdcore::binding::HostSpan& v, rv_policy, cleanup_list*) noexcept {
    return Py_BuildValue("(KK)", (unsigned long long)v.address, (unsigned long long)v.nbytes);
  }
};
}  // namespace nanobind::detail

namespace hvdcore::binding {

using AnyArray = nb::ndarray<nb::ro>;
// What a caller's buffer may be: a DLPack-capable array (numpy, CUDA tensors, ...) or a host span.
using CallerBuffer = std::variant<HostSpan, AnyArray>;

// The memory of a DLPack array, checked to be contiguous (and in host memory for a CPU op).
inline std::pair<void*, size_t> ArrayMemory(const char* what, const std::string& name, const AnyArray& a,
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
inline TensorView MakeView(const char* what, const std::string& name, const std::optional<CallerBuffer>& buffer,
                           int dtype, const std::vector<int64_t>& shape, uint32_t device_kind) {
  TensorView v;
  if (dtype < 0 || dtype >= HVD_DTYPE_COUNT)
    Throw(Status::InvalidArgument("tensor '" + name + "': unknown dtype code"));
  v.dtype = (hvd_dtype)dtype;
  v.shape = shape;
  v.device_kind = device_kind;
  if (!buffer) return v;
  // A span is an address: in host memory for a CPU operation, on the operation's device otherwise.
  const HostSpan* span = std::get_if<HostSpan>(&*buffer);
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

}  // namespace hvdcore::binding
