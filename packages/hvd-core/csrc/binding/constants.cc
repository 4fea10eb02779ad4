// ABI_VERSION, and the numbering of ops, dtypes and device kinds that Python shares with the engine.
#include <cctype>
#include <string>

#include "binding/bindings.h"
#include "core/common.h"
#include "horovod/hvd_backend.h"
#include "horovod/hvd_reduce.hpp"

namespace hvdcore::binding {

void BindConstants(nb::module_& m) {
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
}

}  // namespace hvdcore::binding
