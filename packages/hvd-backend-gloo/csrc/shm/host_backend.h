// What the shared-memory transport needs from the backend that hosts it, and how it reports a
// failure back.
//
// The transport depends on nothing but hvd-core's headers, csrc/common/ and this interface, so
// that any CPU backend can carry it: the Gloo backend gives it the engine's key-value store and
// its settings (shm_transport.cc); another backend could give it a store of its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hvd_shm {

// 4 MiB per member: big enough that a large allreduce moves in few pieces, small enough for a
// container's default 64 MiB /dev/shm with a few communicators of a few members.
constexpr size_t kDefaultSlotBytes = 4u << 20;

// The communicator the transport serves, and the host's settings for it.
struct Config {
  int32_t rank = 0;
  int32_t size = 1;
  std::vector<int32_t> job_ranks;  // job-level rank of each member, named in messages ("rank 3")
  // Bound on every wait for a peer (each wait, not the whole collective).
  std::chrono::milliseconds timeout{30000};
  std::string timeout_setting;  // what sets it, named in timeout messages
  // False when this member must not use shared memory: then no member does.
  bool enabled = true;
  // Bytes of each member's slot, asked for; every member must ask for the same (else no member
  // uses shared memory).
  size_t slot_bytes = kDefaultSlotBytes;
  // Regions are named "/<region_prefix>-<pid of member 0>-<random>" while they have a name.
  std::string region_prefix;
};

// The store through which members agree on the region during set-up. Keys are the transport's
// own ("shm/..."); the host keeps them apart from other communicators'. Get waits until the key
// is published, within the host's bound on set-up, and throws the host's exception when it is
// not; Connect lets such exceptions through.
class Store {
 public:
  virtual ~Store() = default;
  virtual void Set(const std::string& key, const std::string& value) = 0;
  virtual std::string Get(const std::string& key) = 0;
};

// Thrown by every collective of the transport; the host turns it into its status and message.
struct Failure {
  int status;           // an hvd_status
  std::string message;  // e.g. "lost the peer: its process (pid 123) has exited"
  int32_t peer = -1;    // the member this member was waiting on, or -1
};

}  // namespace hvd_shm
