// horovod.common._native._core: the Python binding of the engine (private; horovod.common wraps it).
#include <nanobind/nanobind.h>

#include "binding/bindings.h"

// Each part is bound in its own file (bindings.h). Classes come after the names they use and before
// the signatures that name them, so that signatures and stubs show Python type names.
NB_MODULE(_core, m) {
  using namespace hvdcore::binding;
  m.doc() = "The hvd engine (private: use horovod.common).";
  BindConstants(m);
  BindExceptions(m);
  BindBackend(m);
  BindStores(m);
  BindEngineConfig(m);
  BindDevice(m);
  BindHandle(m);
  BindEngine(m);
  BindFrameworkEntry(m);
}
