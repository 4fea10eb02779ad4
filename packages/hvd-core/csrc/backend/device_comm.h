// A process set's communicator of the device backend (NCCL) on one device, and the work queued on
// it that has not yet been seen complete. Its collectives return once queued; what fails later
// (a lost peer, a CUDA fault, a collective past the backend's timeout) is found by Watch, which the
// engine calls every iteration, naming the tensors that were in flight.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "backend/backend_loader.h"
#include "horovod/hvd_device.h"

namespace hvdcore {

class DeviceComm {
 public:
  DeviceComm(std::unique_ptr<Comm> comm, const hvd_device_v1* device, int32_t device_id)
      : comm_(std::move(comm)), device_(device), device_id_(device_id) {}

  Comm& comm() { return *comm_; }
  int32_t device_id() const { return device_id_; }
  // Remembers work queued on the communicator: `done` is the event recorded after it, `what` says
  // which operation and tensors it was ("allreduce of tensors 'a', 'b'").
  void Queued(std::shared_ptr<void> done, std::string what);
  // OK while nothing has failed. On a failure of queued work the communicator is aborted (its
  // stream drains, every later call fails) and the error names the work in flight.
  Status Watch();

 private:
  struct Work {
    std::shared_ptr<void> done;
    std::string what;
  };
  std::unique_ptr<Comm> comm_;
  const hvd_device_v1* device_;
  const int32_t device_id_;
  std::deque<Work> queued_;
  bool aborted_ = false;
};

}  // namespace hvdcore
