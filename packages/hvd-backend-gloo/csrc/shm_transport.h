// The shared-memory transport (csrc/shm/) as this backend's Transport: its settings from the
// HOROVOD_GLOO_* environment, its set-up through the engine's store.
#pragma once

#include <memory>

#include "transport.h"

namespace hvd_gloo {

// The shared-memory transport for `comm` when every member is on this host and none has turned it
// off (HOROVOD_GLOO_SHARED_MEMORY=0), else null, alike on every member. Throws what the store
// adapter throws.
std::unique_ptr<Transport> ConnectSharedMemory(hvd_comm* comm, StoreAdapter& store);

}  // namespace hvd_gloo
