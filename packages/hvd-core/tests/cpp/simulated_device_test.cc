// The simulated device keeps CUDA's ordering rules and catches what breaks them: a copy not ordered
// after the write it reads (a missing event wait) is a race, whatever the timing; host code reading
// device memory faults; a pointer on the wrong side of a copy is refused, named.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "device/device.h"
#include "device/simulated_device.h"
#include "horovod/hvd_backend.h"

namespace hvdcore {
namespace {

class SimulatedDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SimulatedDeviceClearRaces();
    ASSERT_EQ(d->stream_create(0, &producer), HVD_OK);
    ASSERT_EQ(d->stream_create(0, &consumer), HVD_OK);
    ASSERT_EQ(d->event_create(0, &ready), HVD_OK);
    ASSERT_EQ(d->device_alloc(0, kBytes, &device), HVD_OK);
    ASSERT_EQ(d->host_alloc(kBytes, &host_in), HVD_OK);
    ASSERT_EQ(d->host_alloc(kBytes, &host_out), HVD_OK);
    std::memset(host_in, 7, kBytes);
    std::memset(host_out, 0, kBytes);
  }
  void TearDown() override {
    d->stream_destroy(producer);
    d->stream_destroy(consumer);
    d->event_destroy(ready);
    SimulatedDeviceClearRaces();  // a test that made a race leaves a device others can use
    d->device_free(device);
    d->host_free(host_in);
    d->host_free(host_out);
  }
  // Work that keeps `s` busy for a while, so that work queued after it on another stream would run
  // first if nothing ordered them.
  void Stall(hvd_stream_t s) {
    ASSERT_EQ(d->launch_host_fn(
                  s, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }, nullptr),
              HVD_OK);
  }

  static constexpr size_t kBytes = 4096 * 3 + 5;
  const hvd_device_v1* d = SimulatedDevice();
  hvd_stream_t producer = nullptr, consumer = nullptr;
  hvd_event_t ready = nullptr;
  void* device = nullptr;
  void* host_in = nullptr;
  void* host_out = nullptr;
};

TEST_F(SimulatedDeviceTest, AnEventWaitOrdersTwoStreams) {
  Stall(producer);
  ASSERT_EQ(d->memcpy_async(device, host_in, kBytes, HVD_COPY_HOST_TO_DEVICE, producer), HVD_OK);
  ASSERT_EQ(d->event_record(ready, producer), HVD_OK);
  ASSERT_EQ(d->stream_wait_event(consumer, ready), HVD_OK);
  ASSERT_EQ(d->memcpy_async(host_out, device, kBytes, HVD_COPY_DEVICE_TO_HOST, consumer), HVD_OK);
  ASSERT_EQ(d->stream_synchronize(consumer), HVD_OK);
  EXPECT_EQ(std::memcmp(host_in, host_out, kBytes), 0);
  EXPECT_TRUE(SimulatedDeviceState().races.empty());
}

TEST_F(SimulatedDeviceTest, AMissingWaitIsARaceWhateverTheTiming) {
  ASSERT_EQ(d->memcpy_async(device, host_in, kBytes, HVD_COPY_HOST_TO_DEVICE, producer), HVD_OK);
  ASSERT_EQ(d->event_record(ready, producer), HVD_OK);
  ASSERT_EQ(d->event_synchronize(ready), HVD_OK);  // the write is long done: a race all the same
  ASSERT_EQ(d->memcpy_async(host_out, device, kBytes, HVD_COPY_DEVICE_TO_HOST, consumer), HVD_OK);
  EXPECT_NE(d->stream_synchronize(consumer), HVD_OK);
  const std::string error = d->last_error();
  EXPECT_NE(error.find("device-to-host copy on stream"), std::string::npos) << error;
  EXPECT_NE(error.find("written by host-to-device copy"), std::string::npos) << error;
  ASSERT_EQ(SimulatedDeviceState().races.size(), 1u);
  // Sticky, as a GPU's errors are: every later call fails naming it.
  hvd_event_t other;
  ASSERT_EQ(d->event_create(0, &other), HVD_OK);
  EXPECT_NE(d->event_record(other, producer), HVD_OK);
  EXPECT_NE(std::string(d->last_error()).find("an earlier race"), std::string::npos);
  d->event_destroy(other);
}

TEST_F(SimulatedDeviceTest, AWriteAfterAnUnorderedReadIsARace) {
  ASSERT_EQ(d->memcpy_async(device, host_in, kBytes, HVD_COPY_HOST_TO_DEVICE, producer), HVD_OK);
  ASSERT_EQ(d->event_record(ready, producer), HVD_OK);
  ASSERT_EQ(d->stream_wait_event(consumer, ready), HVD_OK);
  ASSERT_EQ(d->memcpy_async(host_out, device, kBytes, HVD_COPY_DEVICE_TO_HOST, consumer), HVD_OK);
  ASSERT_EQ(d->stream_synchronize(consumer), HVD_OK);
  ASSERT_EQ(d->memset_async(device, 0, kBytes, producer), HVD_OK);  // the producer never waited for the read
  EXPECT_NE(d->stream_synchronize(producer), HVD_OK);
  EXPECT_NE(std::string(d->last_error()).find("read by device-to-host copy"), std::string::npos) << d->last_error();
}

TEST_F(SimulatedDeviceTest, WorkOnOneStreamRunsInOrder) {
  std::vector<int> order;
  std::mutex mu;
  struct Step {
    std::vector<int>* order;
    std::mutex* mu;
    int n;
  };
  std::vector<Step> steps;
  for (int i = 0; i < 20; ++i) steps.push_back({&order, &mu, i});
  for (Step& s : steps) {
    ASSERT_EQ(d->launch_host_fn(
                  producer,
                  [](void* p) {
                    auto* s = static_cast<Step*>(p);
                    std::lock_guard<std::mutex> lk(*s->mu);
                    s->order->push_back(s->n);
                  },
                  &s),
              HVD_OK);
  }
  ASSERT_EQ(d->stream_synchronize(producer), HVD_OK);
  ASSERT_EQ(order.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(order[i], i);
}

TEST_F(SimulatedDeviceTest, EventQueryNeverBlocks) {
  Stall(producer);
  ASSERT_EQ(d->event_record(ready, producer), HVD_OK);
  int done = -1;
  ASSERT_EQ(d->event_query(ready, &done), HVD_OK);
  EXPECT_EQ(done, 0);
  ASSERT_EQ(d->event_synchronize(ready), HVD_OK);
  ASSERT_EQ(d->event_query(ready, &done), HVD_OK);
  EXPECT_EQ(done, 1);
}

TEST_F(SimulatedDeviceTest, PointersOnTheWrongSideAreRefusedAndNamed) {
  EXPECT_EQ(d->memcpy_async(host_out, host_in, kBytes, HVD_COPY_DEVICE_TO_HOST, consumer), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(d->last_error()).find("source"), std::string::npos) << d->last_error();
  EXPECT_EQ(d->memcpy_async(device, device, kBytes, HVD_COPY_HOST_TO_DEVICE, consumer), HVD_ERR_INVALID_ARGUMENT);
  // One byte past the allocation's end.
  EXPECT_EQ(d->memcpy_async(host_out, device, kBytes + 1, HVD_COPY_DEVICE_TO_HOST, consumer), HVD_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(d->last_error()).find("inside one device allocation"), std::string::npos);
}

TEST_F(SimulatedDeviceTest, HostCodeReadingDeviceMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  volatile const char* p = static_cast<const char*>(device);
  EXPECT_DEATH({ (void)*p; }, "");
}

}  // namespace
}  // namespace hvdcore
