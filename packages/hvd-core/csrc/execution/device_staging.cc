#include "execution/device_staging.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "device/device.h"
#include "horovod/hvd_reduce.hpp"

namespace hvdcore {
namespace {

size_t Bytes(const TensorView& v) { return (size_t)v.num_elements() * hvd::dtype_size(v.dtype); }

bool OnDevice(const TensorEntry* e) { return e && e->input.device_kind != HVD_DEVICE_CPU; }

}  // namespace

PinnedPool::~PinnedPool() {
  for (auto& [capacity, p] : free_) device_->host_free(p);
}

std::shared_ptr<void> PinnedPool::Take(size_t bytes, Status* status) {
  // Capacities are powers of two from 4 KiB, so that nearby sizes share buffers.
  size_t capacity = 4096;
  while (capacity < bytes) capacity <<= 1;
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = free_.find(capacity);
    if (it != free_.end()) {
      p = it->second;
      free_.erase(it);
    }
  }
  if (!p) {
    *status = DeviceStatus(device_, device_->host_alloc(capacity, &p),
                           "pinned host memory of " + std::to_string(capacity) + " bytes");
    if (!status->ok()) return nullptr;
  }
  return std::shared_ptr<void>(p, [this, capacity](void* q) {
    std::lock_guard<std::mutex> lk(mu_);
    free_.emplace(capacity, q);
  });
}

DeviceStaging::DeviceStaging(const hvd_device_v1* device, std::shared_ptr<EventPool> events, int32_t device_id)
    : device_(device), events_(std::move(events)), device_id_(device_id), pinned_(device) {}

DeviceStaging::~DeviceStaging() {
  if (stream_) device_->stream_synchronize(stream_);
  in_flight_.clear();
  if (copied_in_) device_->event_destroy(copied_in_);
  if (stream_) device_->stream_destroy(stream_);
}

Status DeviceStaging::Check(int rc, const std::string& what) const {
  return DeviceStatus(device_, rc, what + " on device " + std::to_string(device_id_));
}

Status DeviceStaging::Init() {
  Status st = Check(device_->stream_create(device_id_, &stream_), "creating the engine's stream");
  if (st.ok()) st = Check(device_->event_create(device_id_, &copied_in_), "creating an event");
  return st;
}

Status DeviceStaging::StageIn(std::vector<std::unique_ptr<TensorEntry>>& entries) {
  staged_.clear();  // the batch's memory stays: a device backend's declined attempt may have queued copies
  Status st;
  for (auto& e : entries) {
    if (!OnDevice(e.get())) continue;
    staged_.push_back({e.get(), e->input, e->output});
    st = WaitReady(*e);
    if (!st.ok()) return st;
    const size_t bytes = Bytes(e->input);
    std::shared_ptr<void> in = pinned_.Take(bytes, &st);
    if (!in) return st;
    batch_pinned_.push_back(in);
    if (bytes) {
      st = Check(device_->memcpy_async(in.get(), e->input.data, bytes, HVD_COPY_DEVICE_TO_HOST, stream_),
                 "copying tensor '" + e->name + "' to the host");
      if (!st.ok()) return st;
    }
    const bool in_place = e->output.data == e->input.data;
    e->input.data = in.get();
    e->input.device_kind = HVD_DEVICE_CPU;
    if (in_place) {
      e->output.data = in.get();
    } else if (e->output.data) {
      std::shared_ptr<void> out = pinned_.Take(Bytes(e->output), &st);
      if (!out) return st;
      batch_pinned_.push_back(out);
      e->output.data = out.get();
    }
    if (e->output.data) e->output.device_kind = HVD_DEVICE_CPU;
  }
  if (staged_.empty()) return Status::Ok();
  // The collective reads the host copies now: the one wait of the engine on its own stream.
  st = Check(device_->event_record(copied_in_, stream_), "recording an event");
  if (st.ok()) st = Check(device_->event_synchronize(copied_in_), "copying tensors to the host");
  return st;
}

Status DeviceStaging::StageOut(std::vector<std::unique_ptr<TensorEntry>>& entries, bool ran) {
  if (staged_.empty()) return Status::Ok();
  Batch batch;
  Status st;
  batch.completion = std::make_shared<DeviceCompletion>(DeviceCompletion{device_, device_id_, nullptr});
  batch.completion->done = events_->Take(device_id_, &st);
  // Entries the collective handed back for later are no longer among `entries`: they get no result.
  std::unordered_set<const TensorEntry*> completing;
  for (const auto& e : entries) completing.insert(e.get());
  for (const Staged& s : staged_) {
    TensorEntry* e = s.entry;
    if (!st.ok() || !ran || !completing.count(e) || !e->handle) continue;
    if (s.output.data) {  // the caller's output: the result goes back into it
      if (const size_t bytes = Bytes(s.output)) {
        st = Check(device_->memcpy_async(s.output.data, e->output.data, bytes, HVD_COPY_HOST_TO_DEVICE, stream_),
                   "copying the result of tensor '" + e->name + "' to the device");
      }
    } else if (e->handle->output) {  // an engine-allocated result: into device memory of the engine's
      st = ResultToDevice(*e, &batch);
    }
  }
  if (st.ok()) st = Check(device_->event_record(batch.completion->done.get(), stream_), "recording an event");
  // Every staged entry, completed now or handed back for later, is the caller's own again.
  for (const Staged& s : staged_) {
    s.entry->input = s.input;
    s.entry->output = s.output;
    if (s.entry->handle) s.entry->handle->device = batch.completion;
  }
  batch.pinned = std::move(batch_pinned_);
  batch.scratch = std::move(batch_scratch_);
  batch_pinned_.clear();
  batch_scratch_.clear();
  staged_.clear();
  in_flight_.push_back(std::move(batch));
  return st;
}

Status DeviceStaging::Allocate(size_t bytes, const std::string& what, std::shared_ptr<void>* out) {
  void* mem = nullptr;
  Status st = Check(device_->device_alloc(device_id_, std::max<size_t>(bytes, 1), &mem),
                    "allocating " + std::to_string(bytes) + " bytes for " + what);
  if (!st.ok()) return st;
  const hvd_device_v1* device = device_;
  *out = std::shared_ptr<void>(mem, [device](void* p) { device->device_free(p); });
  return st;
}

Status DeviceStaging::ResultToDevice(TensorEntry& e, Batch* batch) {
  std::shared_ptr<Buffer> host = std::move(e.handle->output);
  Status st = Allocate(host->bytes(), "the result of tensor '" + e.name + "'", &e.handle->output_device);
  if (!st.ok()) return st;
  if (host->bytes()) {
    st = Check(device_->memcpy_async(e.handle->output_device.get(), host->data(), host->bytes(),
                                     HVD_COPY_HOST_TO_DEVICE, stream_),
               "copying the result of tensor '" + e.name + "' to the device");
  }
  batch->host_outputs.push_back(std::move(host));  // read by that copy until the batch's event
  return st;
}

Status DeviceStaging::WaitReady(const TensorEntry& e) {
  if (!e.input.ready_event) return Status::Ok();
  return Check(device_->stream_wait_event(stream_, e.input.ready_event), "waiting for tensor '" + e.name + "'");
}

Status DeviceStaging::Scratch(size_t bytes, const void* host, const std::string& what, void** out) {
  std::shared_ptr<void> mem;
  Status st = Allocate(bytes, what, &mem);
  if (!st.ok()) return st;
  batch_scratch_.push_back(mem);
  *out = mem.get();
  return host ? Upload(*out, host, bytes, what) : st;
}

Status DeviceStaging::Neutral(hvd_dtype dtype, hvd_reduce_op op, size_t count, const std::string& name, void** out) {
  std::vector<uint8_t> host(count * hvd::dtype_size(dtype));
  hvd::fill_identity(dtype, op, host.data(), count);
  return Scratch(host.size(), host.data(), "the neutral data of tensor '" + name + "'", out);
}

Status DeviceStaging::Upload(void* dst, const void* host, size_t bytes, const std::string& what) {
  if (!bytes) return Status::Ok();
  Status st;
  std::shared_ptr<void> pinned = pinned_.Take(bytes, &st);
  if (!pinned) return st;
  batch_pinned_.push_back(pinned);
  std::memcpy(pinned.get(), host, bytes);
  return Check(device_->memcpy_async(dst, pinned.get(), bytes, HVD_COPY_HOST_TO_DEVICE, stream_),
               "copying " + what + " to the device");
}

Status DeviceStaging::ThroughHost(void* data, size_t bytes, const std::function<Status(void*)>& work) {
  Status st;
  std::shared_ptr<void> pinned = pinned_.Take(bytes, &st);
  if (!pinned) return st;
  batch_pinned_.push_back(pinned);
  st = Check(device_->memcpy_async(pinned.get(), data, bytes, HVD_COPY_DEVICE_TO_HOST, stream_), "copying to the host");
  if (st.ok()) st = Check(device_->event_record(copied_in_, stream_), "recording an event");
  if (st.ok()) st = Check(device_->event_synchronize(copied_in_), "copying to the host");
  if (st.ok()) st = work(pinned.get());
  if (!st.ok()) return st;
  return Check(device_->memcpy_async(data, pinned.get(), bytes, HVD_COPY_HOST_TO_DEVICE, stream_),
               "copying to the device");
}

Status DeviceStaging::Copy(void* dst, const void* src, size_t bytes, const std::string& what) {
  if (!bytes) return Status::Ok();
  return Check(device_->memcpy_async(dst, src, bytes, HVD_COPY_DEVICE_TO_DEVICE, stream_), "copying " + what);
}

Status DeviceStaging::Result(TensorEntry& e, size_t bytes, void** out) {
  Status st = Allocate(bytes, "the result of tensor '" + e.name + "'", &e.handle->output_device);
  *out = st.ok() ? e.handle->output_device.get() : nullptr;
  return st;
}

Status DeviceStaging::Finish(std::vector<std::unique_ptr<TensorEntry>>& entries, std::shared_ptr<void>* done) {
  Batch batch;
  Status st;
  batch.completion = std::make_shared<DeviceCompletion>(DeviceCompletion{device_, device_id_, nullptr});
  batch.completion->done = events_->Take(device_id_, &st);
  if (st.ok()) st = Check(device_->event_record(batch.completion->done.get(), stream_), "recording an event");
  for (auto& e : entries)
    if (e && e->handle) e->handle->device = batch.completion;
  *done = batch.completion->done;
  batch.pinned = std::move(batch_pinned_);
  batch.scratch = std::move(batch_scratch_);
  batch_pinned_.clear();
  batch_scratch_.clear();
  in_flight_.push_back(std::move(batch));
  return st;
}

void DeviceStaging::Reclaim() {
  size_t kept = 0;
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    int done = 0;
    if (device_->event_query(in_flight_[i].completion->done.get(), &done) == HVD_OK && !done) {
      // Never onto itself: a vector moved onto itself is left empty, its memory freed under the copies.
      if (kept != i) in_flight_[kept] = std::move(in_flight_[i]);
      ++kept;
    }
  }
  in_flight_.resize(kept);
}

DeviceStaging* DeviceStagings::For(int32_t device_id, Status* status) {
  std::unique_ptr<DeviceStaging>& s = by_device_[device_id];
  if (!s) {
    auto made = std::make_unique<DeviceStaging>(device_, events_, device_id);
    *status = made->Init();
    if (!status->ok()) return nullptr;
    s = std::move(made);
  }
  return s.get();
}

std::vector<int32_t> DeviceStagings::Devices() const {
  std::vector<int32_t> ids;
  for (const auto& [id, s] : by_device_) ids.push_back(id);
  return ids;
}

void DeviceStagings::Reclaim() {
  for (auto& [id, s] : by_device_) s->Reclaim();
}

}  // namespace hvdcore
