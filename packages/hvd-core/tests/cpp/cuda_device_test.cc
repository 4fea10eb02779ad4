// The CUDA device on a machine without a GPU driver: a clear error naming what is missing, never a
// crash. Skipped where a GPU is present (./dev gpu-check covers that machine).
#include <gtest/gtest.h>

#include <string>

#include "device/device.h"

namespace hvdcore {
namespace {

TEST(CudaDevice, WithoutADriverSaysWhatIsMissing) {
  std::string error;
  const hvd_device_v1* d = CudaDevice(&error);
  if (d) GTEST_SKIP() << "this machine has a working CUDA device";
  EXPECT_NE(error.find("libcudart"), std::string::npos) << error;
  // Either the runtime is missing, or it loaded and found no driver or GPU.
  EXPECT_TRUE(error.find("could not be loaded") != std::string::npos ||
              error.find("cudaGetDeviceCount") != std::string::npos)
      << error;
}

TEST(CudaDevice, ChoiceByName) {
  std::string error;
  EXPECT_EQ(DeviceNamed("simulated", &error), SimulatedDevice());
  EXPECT_EQ(DeviceNamed("tpu", &error), nullptr);
  EXPECT_NE(error.find("HOROVOD_DEVICE='tpu'"), std::string::npos) << error;
}

}  // namespace
}  // namespace hvdcore
