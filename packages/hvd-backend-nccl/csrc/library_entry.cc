// The entry points the Python package calls through ctypes on this same file (nccl.py): load
// NCCL from the places it found, and say which NCCL is loaded.
#include <cstdio>
#include <string>
#include <vector>

#include "errors.h"
#include "nccl_library.h"

// Loads NCCL unless loaded: `explicit_path` alone when it is not empty (HOROVOD_NCCL_LIBRARY),
// else the copy already in the process, the `n` candidate paths, then the system's search.
extern "C" HVD_BACKEND_EXPORT int hvd_nccl_load(const char* explicit_path, const char* const* candidates, int32_t n,
                                                char* error, size_t error_len) {
  std::vector<std::string> places;
  for (int32_t i = 0; i < n; ++i) places.emplace_back(candidates[i]);
  std::string why;
  int rc = hvd_nccl::Load(explicit_path ? explicit_path : "", places, &why);
  return rc ? hvd_nccl::Report(error, error_len, rc, why) : HVD_OK;
}

// The loaded NCCL's version code (0 before hvd_nccl_load succeeded), and where it came from.
extern "C" HVD_BACKEND_EXPORT int hvd_nccl_loaded(char* origin, size_t origin_len) {
  const hvd_nccl::NcclApi* api = hvd_nccl::Api();
  if (origin && origin_len) std::snprintf(origin, origin_len, "%s", api ? api->origin : "");
  return api ? api->version : 0;
}
