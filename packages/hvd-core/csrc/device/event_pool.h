// Events for reuse. Every device operation takes two (its ready event on the caller's stream, the
// completion event of its batch), and creating and destroying one is a runtime call each, on the
// path of every tensor. An event goes back to the pool when its last holder lets go; a wait already
// queued on it is unaffected by a later record, so it can be reused at once. Each event handed out
// holds a share of the pool, which therefore outlives them (a handle may outlive the engine).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/common.h"
#include "horovod/hvd_device.h"

namespace hvdcore {

class EventPool : public std::enable_shared_from_this<EventPool> {
 public:
  static std::shared_ptr<EventPool> Create(const hvd_device_v1* device) {
    return std::shared_ptr<EventPool>(new EventPool(device));
  }
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  // An event of device `device_id`; null, with the device's error in *status, when none can be made.
  std::shared_ptr<void> Take(int32_t device_id, Status* status);

 private:
  explicit EventPool(const hvd_device_v1* device) : device_(device) {}
  const hvd_device_v1* device_;
  std::mutex mu_;  // events come back from whichever thread lets go of them last
  std::map<int32_t, std::vector<hvd_event_t>> free_;
};

}  // namespace hvdcore
