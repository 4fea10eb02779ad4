// The device layer (horovod/hvd_device.h) as the engine uses it: choosing the implementation, and
// turning its status codes into the engine's Status.
#pragma once

#include <string>

#include "core/common.h"
#include "horovod/hvd_device.h"

namespace hvdcore {

// The simulated device (simulated_device.cc): one per process, created on first use.
const hvd_device_v1* SimulatedDevice();
// CUDA through libcudart loaded at run time; null, with *error naming what is missing, when the
// library or a driver is not there.
const hvd_device_v1* CudaDevice(std::string* error);
// The implementation HOROVOD_DEVICE names: "simulated", or "cuda" (also for an empty choice).
const hvd_device_v1* DeviceNamed(const std::string& choice, std::string* error);

// OK, or an Aborted status saying what failed: "<device name>: <what>: <last_error>".
Status DeviceStatus(const hvd_device_v1* device, int rc, const std::string& what);

}  // namespace hvdcore
