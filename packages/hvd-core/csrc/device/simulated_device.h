// The simulated device: hvd_device_v1 on CPU threads, for tests of the GPU path on machines
// without a GPU.
//
// - Each stream is a worker thread running its queued work in order; the default stream (NULL) is
//   one more stream of each device. Events are real signals between those threads.
// - Device memory is mapped PROT_NONE and opened only while a stream's copy or memset touches it, so
//   host code that reads it by mistake (a CPU backend handed a device pointer) faults at once.
// - Every copy and memset is checked for order, as a race detector would: each stream keeps a
//   vector clock, advanced by its own work and joined through stream_wait_event, and each
//   allocation remembers which stream last wrote it and which read it, at what time. An access not
//   ordered after the last conflicting one (a missing event wait) is a race: it is recorded, and
//   from then on every call fails naming it (a sticky error, as a GPU's are), whatever the timing.
// - HOROVOD_SIMULATED_DEVICE_DELAY_US=N delays each piece of work by a random 0..N µs, shuffling
//   the interleaving of streams (HOROVOD_SIMULATED_DEVICE_SEED fixes it);
//   HOROVOD_SIMULATED_DEVICE_COUNT sets how many devices there are (default 8).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hvdcore {

// What tests ask of the simulated device beyond hvd_device_v1.
struct SimulatedDeviceReport {
  std::vector<std::string> races;  // each unordered access found, in the order found
  int64_t allocations = 0;         // device allocations not yet freed
  int64_t streams = 0;             // streams created and not yet destroyed
};
SimulatedDeviceReport SimulatedDeviceState();
// Forgets the races found (the sticky error), so one process can run more tests.
void SimulatedDeviceClearRaces();

}  // namespace hvdcore
