// Device tensors through a backend that reads host memory only (Gloo, MPI without CUDA awareness):
// the engine's stream waits for each tensor's ready event (never a device-wide sync), copies it into
// pinned host memory, the collective runs there, and the results go back on the same stream. The
// handles complete with an event recorded after those copies, which the caller's stream waits on.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/handle.h"
#include "device/event_pool.h"
#include "horovod/hvd_backend.h"
#include "horovod/hvd_device.h"

namespace hvdcore {

// Pinned host memory, reused: a training step stages the same sizes again and again, and a page-
// locked allocation costs far more than a copy.
class PinnedPool {
 public:
  explicit PinnedPool(const hvd_device_v1* device) : device_(device) {}
  ~PinnedPool();
  // Null, with the device's error in *status, when none can be had.
  std::shared_ptr<void> Take(size_t bytes, Status* status);

 private:
  const hvd_device_v1* device_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;  // by capacity
};

// Work of the engine's on one device: its stream, its pinned memory, and the staged batches whose
// copies back may still be running.
class DeviceStaging {
 public:
  DeviceStaging(const hvd_device_v1* device, std::shared_ptr<EventPool> events, int32_t device_id);
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;
  Status Init();

  // Before the collective: each device entry's input is copied to pinned memory (and its output,
  // when the caller gave one, gets pinned memory too), and the entries' views point there.
  Status StageIn(std::vector<std::unique_ptr<TensorEntry>>& entries);
  // After it (`ran`: whether it succeeded): results go back to the caller's outputs or to device
  // memory the engine allocates, every staged entry's views are its own again, and each handle gets
  // the completion event. Entries the collective handed back for later are restored too.
  Status StageOut(std::vector<std::unique_ptr<TensorEntry>>& entries, bool ran);
  // Lets go of the memory of batches whose copies back have finished.
  void Reclaim();

  // For a batch queued on the device backend instead (execution/device_collectives.cc), on the
  // engine's stream:
  hvd_stream_t stream() const { return stream_; }
  // The stream waits for the entry's ready event.
  Status WaitReady(const TensorEntry& e);
  // Device memory kept until the batch's work has run (a joined member's neutral data, scratch
  // space); with `host`, `bytes` of it are copied there first (through pinned memory).
  Status Scratch(size_t bytes, const void* host, const std::string& what, void** out);
  // Device memory of the batch holding `count` elements neutral to `op` (what a member without
  // tensor `name` contributes).
  Status Neutral(hvd_dtype dtype, hvd_reduce_op op, size_t count, const std::string& name, void** out);
  // `bytes` of host data copied to device memory at `dst` on the stream (through pinned memory).
  Status Upload(void* dst, const void* host, size_t bytes, const std::string& what);
  // Runs `work` on a host copy of `bytes` of device memory at `data` (pinned; the engine's thread
  // waits for the copy), then copies the host copy back: a step of the CPU backend amid device work.
  Status ThroughHost(void* data, size_t bytes, const std::function<Status(void*)>& work);
  // A device-to-device copy on the stream (`what` names the tensor for an error).
  Status Copy(void* dst, const void* src, size_t bytes, const std::string& what);
  // An engine-allocated result (allgather, alltoall, reducescatter) in device memory, handed to the
  // entry's handle (HandleState::output_device).
  Status Result(TensorEntry& e, size_t bytes, void** out);
  // Records the batch's completion event and gives it to each entry's handle; *done is the event.
  Status Finish(std::vector<std::unique_ptr<TensorEntry>>& entries, std::shared_ptr<void>* done);

  const hvd_device_v1* device() const { return device_; }

 private:
  struct Staged {
    TensorEntry* entry;
    TensorView input, output;  // the entry's own views
  };
  // What one batch keeps alive until its copies back have run.
  struct Batch {
    std::shared_ptr<DeviceCompletion> completion;
    std::vector<std::shared_ptr<void>> pinned;
    std::vector<std::shared_ptr<void>> scratch;  // device memory
    std::vector<std::shared_ptr<Buffer>> host_outputs;
  };
  Status Check(int rc, const std::string& what) const;
  // An engine-allocated result (allgather, alltoall, reducescatter) copied into device memory.
  Status ResultToDevice(TensorEntry& e, Batch* batch);
  // Device memory of `bytes`, freed when the last holder lets go.
  Status Allocate(size_t bytes, const std::string& what, std::shared_ptr<void>* out);

  const hvd_device_v1* device_;
  std::shared_ptr<EventPool> events_;
  const int32_t device_id_;
  hvd_stream_t stream_ = nullptr;
  hvd_event_t copied_in_ = nullptr;
  PinnedPool pinned_;
  std::vector<Staged> staged_;  // the batch between StageIn and StageOut
  std::vector<std::shared_ptr<void>> batch_pinned_;
  std::vector<std::shared_ptr<void>> batch_scratch_;
  std::vector<Batch> in_flight_;
};

// The engine's DeviceStaging of each device it has met, made on first use; engine thread only.
class DeviceStagings {
 public:
  // The device tensors are on, and its events; set before the first device operation runs.
  void set_device(const hvd_device_v1* device, std::shared_ptr<EventPool> events) {
    device_ = device;
    events_ = std::move(events);
  }
  // Null, with the failure in *status, when the device's stream cannot be made.
  DeviceStaging* For(int32_t device_id, Status* status);
  void Reclaim();
  // The ids of the devices met so far, ascending.
  std::vector<int32_t> Devices() const;
  // Destroys the streams and pinned memory (waiting for their work): before the device goes away.
  void Clear() { by_device_.clear(); }

 private:
  const hvd_device_v1* device_ = nullptr;
  std::shared_ptr<EventPool> events_;
  std::map<int32_t, std::unique_ptr<DeviceStaging>> by_device_;
};

}  // namespace hvdcore
