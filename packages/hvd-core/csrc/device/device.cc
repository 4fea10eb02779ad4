#include "device/device.h"

namespace hvdcore {

const hvd_device_v1* DeviceNamed(const std::string& choice, std::string* error) {
  if (choice == "simulated") return SimulatedDevice();
  if (choice.empty() || choice == "cuda") return CudaDevice(error);
  if (error) *error = "HOROVOD_DEVICE='" + choice + "': expected 'cuda' or 'simulated'";
  return nullptr;
}

Status DeviceStatus(const hvd_device_v1* device, int rc, const std::string& what) {
  if (rc == HVD_OK) return Status::Ok();
  return Status::Aborted(std::string(device->name) + " device: " + what + ": " + device->last_error());
}

}  // namespace hvdcore
