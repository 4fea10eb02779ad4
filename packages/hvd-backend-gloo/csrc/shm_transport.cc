#include "shm_transport.h"

#include <strings.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "comm.h"
#include "common/buffer_list.h"
#include "horovod/hvd_reduce.hpp"
#include "shm/collectives.h"
#include "shm/group.h"
#include "tcp/store_adapter.h"

namespace hvd_gloo {
namespace {

// Off as hvd-core reads its boolean settings: 0, false, no or off, in any case.
bool Disabled() {
  const char* env = std::getenv("HOROVOD_GLOO_SHARED_MEMORY");
  if (!env) return false;
  for (const char* off : {"0", "false", "no", "off"})
    if (strcasecmp(env, off) == 0) return true;
  return false;
}

// The slot size asked for (a plain number of bytes), or the default when the setting is absent or
// not such a number. Every member must ask for the same (the transport checks it).
size_t SlotBytes() {
  const char* env = std::getenv("HOROVOD_GLOO_SHARED_MEMORY_SLOT_BYTES");
  if (!env || !*env) return hvd_shm::kDefaultSlotBytes;
  char* end = nullptr;
  errno = 0;
  unsigned long long bytes = std::strtoull(env, &end, 10);
  if (errno || *end || env[0] == '-') return hvd_shm::kDefaultSlotBytes;
  return (size_t)bytes;
}

// The transport's keys go into the engine's store through the adapter that connected Gloo: under
// the communicator's prefix, within the same set-up deadline, failing with the same exceptions.
class StoreBridge final : public hvd_shm::Store {
 public:
  explicit StoreBridge(StoreAdapter& store) : store_(store) {}
  void Set(const std::string& key, const std::string& value) override {
    store_.set(key, std::vector<char>(value.begin(), value.end()));
  }
  std::string Get(const std::string& key) override {
    std::vector<char> value = store_.get(key);
    return std::string(value.begin(), value.end());
  }

 private:
  StoreAdapter& store_;
};

class SharedMemoryTransport final : public Transport {
 public:
  explicit SharedMemoryTransport(std::unique_ptr<hvd_shm::Group> group) : group_(std::move(group)) {}

  const char* name() const override { return "shared memory"; }

  void Allreduce(const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op) override {
    const hvd_buffer_pair whole{sendbuf, recvbuf, count};
    hvd_shm::Allreduce(*group_, hvd_common::BufferList(&whole, 1, hvd::dtype_size(dtype)), dtype, op, 1.0);
  }
  void AllreduceBuffers(const hvd_common::BufferList& buffers, hvd_dtype dtype, hvd_reduce_op op,
                        double postscale) override {
    hvd_shm::Allreduce(*group_, buffers, dtype, op, postscale);
  }
  void Allgatherv(const void* sendbuf, void* recvbuf, const size_t* recvcounts, size_t element_size) override {
    hvd_shm::Allgatherv(*group_, sendbuf, recvbuf, recvcounts, element_size);
  }
  void Broadcast(void* buf, size_t count, size_t element_size, int32_t root) override {
    hvd_shm::Broadcast(*group_, buf, count * element_size, root);
  }
  void Alltoallv(const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
                 size_t element_size) override {
    hvd_shm::Alltoallv(*group_, sendbuf, sendcounts, recvbuf, recvcounts, element_size);
  }
  void Reducescatter(const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                     hvd_reduce_op op) override {
    hvd_shm::Reducescatter(*group_, sendbuf, recvbuf, recvcounts, dtype, op);
  }
  void Barrier() override { hvd_shm::Barrier(*group_); }

 private:
  std::unique_ptr<hvd_shm::Group> group_;
};

}  // namespace

std::unique_ptr<Transport> ConnectSharedMemory(hvd_comm* comm, StoreAdapter& store) {
  hvd_shm::Config config;
  config.rank = comm->rank;
  config.size = comm->size;
  config.job_ranks = comm->job_ranks;
  config.timeout = comm->timeout;
  config.timeout_setting = "HOROVOD_GLOO_TIMEOUT_SECONDS";
  config.enabled = !Disabled();
  config.slot_bytes = SlotBytes();
  config.region_prefix = "hvd-gloo";
  StoreBridge bridge(store);
  std::unique_ptr<hvd_shm::Group> group = hvd_shm::Group::Connect(config, bridge);
  if (!group) return nullptr;
  return std::make_unique<SharedMemoryTransport>(std::move(group));
}

}  // namespace hvd_gloo
