// The key-value stores an engine is given: in memory (one process), or the launcher's through Python.
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/kv_store.h"
#include "binding/bindings.h"
#include "binding/callback_store.h"

namespace hvdcore::binding {

using namespace nb::literals;

void BindStores(nb::module_& m) {
  nb::class_<KVStore>(m, "KVStore");
  nb::class_<InMemoryStore, KVStore>(m, "InMemoryStore")
      .def(nb::init<>())
      .def("set",
           [](InMemoryStore& s, const std::string& k, nb::bytes v) {
             const uint8_t* p = (const uint8_t*)v.c_str();
             s.Set(k, std::vector<uint8_t>(p, p + v.size()));
           })
      .def("get",
           [](InMemoryStore& s, const std::string& k, double timeout_s) -> nb::object {
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
}

}  // namespace hvdcore::binding
