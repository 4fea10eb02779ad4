#include "device/event_pool.h"

#include "device/device.h"

namespace hvdcore {

EventPool::~EventPool() {
  for (auto& [device_id, events] : free_)
    for (hvd_event_t e : events) device_->event_destroy(e);
}

std::shared_ptr<void> EventPool::Take(int32_t device_id, Status* status) {
  hvd_event_t event = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<hvd_event_t>& free = free_[device_id];
    if (!free.empty()) {
      event = free.back();
      free.pop_back();
    }
  }
  if (!event) {
    *status = DeviceStatus(device_, device_->event_create(device_id, &event),
                           "creating an event on device " + std::to_string(device_id));
    if (!status->ok()) return nullptr;
  }
  std::shared_ptr<EventPool> pool = shared_from_this();
  return std::shared_ptr<void>(event, [pool, device_id](void* e) {
    std::lock_guard<std::mutex> lk(pool->mu_);
    pool->free_[device_id].push_back(e);
  });
}

}  // namespace hvdcore
