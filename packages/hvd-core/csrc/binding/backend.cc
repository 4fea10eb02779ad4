// Backend: a loaded backend library, and what it says about itself.
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/backend_loader.h"
#include "binding/bindings.h"

namespace hvdcore::binding {

using namespace nb::literals;

void BindBackend(nb::module_& m) {
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
            if (b.has_eager()) found.push_back("eager");
            if (b.has_eager_receive_into()) found.push_back("eager_receive_into");
            return found;
          },
          "The optional functions of hvd_backend_ext_v1 the backend implements (and the engine uses).")
      .def_prop_ro("device_kinds", [](const Backend& b) { return b.api()->device_kinds; })
      .def_prop_ro("capabilities", [](const Backend& b) { return b.api()->capabilities; });
}

}  // namespace hvdcore::binding
