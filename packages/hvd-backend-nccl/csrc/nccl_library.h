// Finding, opening and checking libnccl at run time, once per process.
//
// Order: a path the user names (HOROVOD_NCCL_LIBRARY) and nothing else; otherwise the copy
// already in the process (a framework such as torch loads its own: dlopen with RTLD_NOLOAD, so
// both share one NCCL), then the candidates the Python package found (the nvidia-nccl-cu13 and
// -cu12 wheels' lib/ folders), then libnccl.so.2 by the system's search. Whatever loads must be
// NCCL 2.7 or later (its version is read with ncclGetVersion) and export every required function.
#pragma once

#include <string>
#include <vector>

#include "nccl_api.h"

namespace hvd_nccl {

// Loads NCCL unless it is loaded. `explicit_path` (may be empty) is the only place tried when set.
// HVD_OK, or a status with `error` saying what was tried and why each failed.
int Load(const std::string& explicit_path, const std::vector<std::string>& candidates, std::string* error);

// The loaded library's functions, or nullptr before a Load succeeded.
const NcclApi* Api();

// "2.30.7" for a version code as ncclGetVersion returns it.
std::string VersionText(int code);

}  // namespace hvd_nccl
