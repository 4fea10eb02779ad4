// The in-memory backend: N engines in one process, connected through shared memory.
//
// It implements the same C ABI as every other backend and is loaded through the same loader (the
// extension exports hvd_backend_v1_get), so tests of negotiation, fusion and caching with N ranks
// exercise the real engine end to end without starting processes. Each collective is two
// barriers: members publish their buffers, each computes its own result from everyone's inputs,
// and writes it only after the second barrier, when nobody reads its buffers any more.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/common.h"
#include "horovod/hvd_backend.h"
#include "horovod/hvd_reduce.hpp"

namespace {

enum class Kind { kAllreduce, kAllgatherv, kBroadcast, kAlltoallv, kReducescatter, kBarrier };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kAllreduce: return "allreduce";
    case Kind::kAllgatherv: return "allgatherv";
    case Kind::kBroadcast: return "broadcast";
    case Kind::kAlltoallv: return "alltoallv";
    case Kind::kReducescatter: return "reducescatter";
    case Kind::kBarrier: return "barrier";
  }
  return "?";
}

struct Slot {
  Kind kind = Kind::kBarrier;
  const void* send = nullptr;
  size_t count = 0;
  const size_t* counts = nullptr;  // allgatherv/reducescatter: per member; alltoallv: send counts
  hvd_dtype dtype = HVD_DTYPE_UINT8;
  hvd_reduce_op op = HVD_REDUCE_SUM;
  int32_t root = 0;
};

struct Group {
  explicit Group(int n) : size(n), slots(n), arrivals(n, 0), departed(n, false) {}
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  uint64_t generation = 0;
  int arrived = 0;
  int members_joined = 0;
  std::vector<Slot> slots;
  std::vector<uint64_t> arrivals;  // per member: generation it last arrived at, to name the missing
  // Eager messages (hvd_backend_ext_v1): mail[channel][to * size + from], copied in when sent.
  // The engine sends a peer at most two messages it has not released, on each channel.
  std::vector<size_t> eager_bytes;  // per channel
  std::vector<std::vector<std::deque<std::vector<uint8_t>>>> mail;
  // Per member: destroyed its communicator. A peer's messages sent before that are still taken;
  // only a wait for one that member can no longer send fails.
  std::vector<bool> departed;
  bool broken = false;
  std::string broken_reason;
};

std::mutex g_registry_mu;
std::map<std::string, std::shared_ptr<Group>> g_registry;

}  // namespace

struct hvd_comm {
  std::shared_ptr<Group> group;
  int rank = 0;
  int64_t timeout_ms = 30000;
  std::string last_error;
};

namespace {

int Fail(hvd_comm* c, int code, std::string message) {
  c->last_error = std::move(message);
  return code;
}

// Cyclic barrier with a deadline; a timeout or a departed member breaks the group for everyone.
int Arrive(hvd_comm* c, const char* what) {
  Group& g = *c->group;
  std::unique_lock<std::mutex> lk(g.mu);
  if (g.broken) return Fail(c, HVD_ERR_PEER_LOST, g.broken_reason);
  for (int r = 0; r < g.size; ++r) {
    if (g.departed[r]) {  // it will never arrive (one that left mid-collective broke the group then)
      g.broken = true;
      g.broken_reason = "rank " + std::to_string(r) + " left the communicator";
      g.cv.notify_all();
      return Fail(c, HVD_ERR_PEER_LOST, g.broken_reason);
    }
  }
  uint64_t gen = g.generation;
  g.arrivals[c->rank] = gen + 1;
  if (++g.arrived == g.size) {
    g.arrived = 0;
    ++g.generation;
    g.cv.notify_all();
    return HVD_OK;
  }
  bool done =
      g.cv.wait_for(lk, std::chrono::milliseconds(c->timeout_ms), [&] { return g.generation != gen || g.broken; });
  if (g.generation != gen) return HVD_OK;
  if (g.broken) return Fail(c, HVD_ERR_PEER_LOST, g.broken_reason);
  (void)done;
  std::vector<int32_t> missing;
  for (int r = 0; r < g.size; ++r)
    if (g.arrivals[r] != gen + 1) missing.push_back(r);
  g.broken = true;
  g.broken_reason = std::string("in-memory ") + what + " timed out after " + std::to_string(c->timeout_ms) +
                    " ms waiting for ranks " + hvdcore::RanksString(missing);
  g.cv.notify_all();
  return Fail(c, HVD_ERR_TIMEOUT, g.broken_reason);
}

// Publishes this member's slot, waits for all, and checks they called the same collective.
int Publish(hvd_comm* c, const Slot& slot) {
  c->group->slots[c->rank] = slot;
  int rc = Arrive(c, KindName(slot.kind));
  if (rc != HVD_OK) return rc;
  for (int r = 0; r < c->group->size; ++r) {
    const Slot& other = c->group->slots[r];
    if (other.kind != slot.kind || other.dtype != slot.dtype) {
      return Fail(c, HVD_ERR_INVALID_ARGUMENT,
                  std::string("rank ") + std::to_string(c->rank) + " called " + KindName(slot.kind) + " (" +
                      hvd::dtype_name(slot.dtype) + ") while rank " + std::to_string(r) + " called " +
                      KindName(other.kind) + " (" + hvd::dtype_name(other.dtype) + ")");
    }
  }
  return HVD_OK;
}

int CreateComm(const hvd_comm_config_v1* config, const hvd_store_v1* store, hvd_comm** out, char* error,
               size_t error_len) {
  auto report = [&](const std::string& m) {
    snprintf(error, error_len, "%s", m.c_str());
    return HVD_ERR_INVALID_ARGUMENT;
  };
  if (!config || !store || !out) return report("null argument");
  if (config->size < 1 || config->rank < 0 || config->rank >= config->size) return report("bad rank or size");
  if (config->device_kind != HVD_DEVICE_CPU) return report("the in-memory backend serves CPU tensors only");
  std::string prefix = config->key_prefix ? config->key_prefix : "";
  // Rendezvous through the store, like a real backend: everyone announces, everyone waits.
  std::string mine = prefix + "/inmemory/" + std::to_string(config->rank);
  if (store->set(store->ctx, mine.c_str(), "1", 1) != HVD_OK) return report("store set failed");
  for (int r = 0; r < config->size; ++r) {
    std::string key = prefix + "/inmemory/" + std::to_string(r);
    void* value = nullptr;
    size_t len = 0;
    if (store->get(store->ctx, key.c_str(), &value, &len, config->timeout_ms) != HVD_OK) {
      snprintf(error, error_len, "rank %d did not join communicator '%s' within %lld ms", r, prefix.c_str(),
               (long long)config->timeout_ms);
      return HVD_ERR_TIMEOUT;
    }
    store->release(store->ctx, value);
  }
  // Groups are keyed by store and prefix, so independent test clusters never meet.
  std::string key = std::to_string((uintptr_t)store->ctx) + "|" + prefix;
  std::shared_ptr<Group> group;
  {
    std::lock_guard<std::mutex> lk(g_registry_mu);
    auto& slot = g_registry[key];
    if (!slot) slot = std::make_shared<Group>(config->size);
    group = slot;
    if (group->size != config->size) return report("members disagree about the communicator size");
    if (++group->members_joined == group->size) g_registry.erase(key);
  }
  auto* comm = new hvd_comm();
  comm->group = std::move(group);
  comm->rank = config->rank;
  comm->timeout_ms = config->timeout_ms;
  *out = comm;
  return HVD_OK;
}

void DestroyComm(hvd_comm* c) {
  if (!c) return;
  {
    // Peers still waiting on this member would otherwise wait for the full timeout: those in a
    // collective, and those waiting for a message from it (not those waiting for another peer's,
    // which may be on its way).
    std::lock_guard<std::mutex> lk(c->group->mu);
    c->group->departed[c->rank] = true;
    if (c->group->arrived > 0 && !c->group->broken) {
      c->group->broken = true;
      c->group->broken_reason = "rank " + std::to_string(c->rank) + " left the communicator";
    }
    c->group->cv.notify_all();
  }
  delete c;
}

const char* LastError(const hvd_comm* c) { return c ? c->last_error.c_str() : "null communicator"; }

int Allreduce(hvd_comm* c, const void* send, void* recv, size_t count, hvd_dtype dtype, hvd_reduce_op op) {
  Slot s;
  s.kind = Kind::kAllreduce;
  s.send = send;
  s.count = count;
  s.dtype = dtype;
  s.op = op;
  int rc = Publish(c, s);
  if (rc != HVD_OK) return rc;
  Group& g = *c->group;
  size_t bytes = count * hvd::dtype_size(dtype);
  for (int r = 0; r < g.size; ++r)
    if (g.slots[r].count != count || g.slots[r].op != op)
      return Fail(c, HVD_ERR_INVALID_ARGUMENT, "allreduce count or op differs between ranks");
  std::vector<uint8_t> acc((const uint8_t*)g.slots[0].send, (const uint8_t*)g.slots[0].send + bytes);
  for (int r = 1; r < g.size; ++r) hvd::reduce_into(dtype, op, acc.data(), g.slots[r].send, count);
  rc = Arrive(c, "allreduce");
  if (rc != HVD_OK) return rc;
  if (bytes) std::memcpy(recv, acc.data(), bytes);
  return HVD_OK;
}

int Allgatherv(hvd_comm* c, const void* send, void* recv, const size_t* counts, hvd_dtype dtype) {
  Slot s;
  s.kind = Kind::kAllgatherv;
  s.send = send;
  s.counts = counts;
  s.count = counts[c->rank];
  s.dtype = dtype;
  int rc = Publish(c, s);
  if (rc != HVD_OK) return rc;
  Group& g = *c->group;
  size_t esize = hvd::dtype_size(dtype), offset = 0;
  for (int r = 0; r < g.size; ++r) {
    if (g.slots[r].count != counts[r])
      return Fail(c, HVD_ERR_INVALID_ARGUMENT,
                  "allgatherv: rank " + std::to_string(r) + " sends a different count than expected");
    if (counts[r]) std::memcpy((uint8_t*)recv + offset, g.slots[r].send, counts[r] * esize);
    offset += counts[r] * esize;
  }
  return Arrive(c, "allgatherv");
}

int Broadcast(hvd_comm* c, void* buf, size_t count, hvd_dtype dtype, int32_t root) {
  if (root < 0 || root >= c->group->size) return Fail(c, HVD_ERR_INVALID_ARGUMENT, "broadcast root out of range");
  Slot s;
  s.kind = Kind::kBroadcast;
  s.send = buf;
  s.count = count;
  s.dtype = dtype;
  s.root = root;
  int rc = Publish(c, s);
  if (rc != HVD_OK) return rc;
  const Slot& r = c->group->slots[root];
  if (r.count != count || r.root != root)
    return Fail(c, HVD_ERR_INVALID_ARGUMENT, "broadcast count or root differs between ranks");
  if (c->rank != root && count) std::memcpy(buf, r.send, count * hvd::dtype_size(dtype));
  return Arrive(c, "broadcast");
}

int Alltoallv(hvd_comm* c, const void* send, const size_t* send_counts, void* recv, const size_t* recv_counts,
              hvd_dtype dtype) {
  Slot s;
  s.kind = Kind::kAlltoallv;
  s.send = send;
  s.counts = send_counts;
  s.dtype = dtype;
  int rc = Publish(c, s);
  if (rc != HVD_OK) return rc;
  Group& g = *c->group;
  size_t esize = hvd::dtype_size(dtype), out = 0;
  for (int r = 0; r < g.size; ++r) {
    const Slot& peer = g.slots[r];
    size_t in = 0;
    for (int k = 0; k < c->rank; ++k) in += peer.counts[k];
    if (peer.counts[c->rank] != recv_counts[r])
      return Fail(c, HVD_ERR_INVALID_ARGUMENT,
                  "alltoallv: rank " + std::to_string(r) + " sends " + std::to_string(peer.counts[c->rank]) +
                      " elements, expected " + std::to_string(recv_counts[r]));
    if (recv_counts[r])
      std::memcpy((uint8_t*)recv + out * esize, (const uint8_t*)peer.send + in * esize, recv_counts[r] * esize);
    out += recv_counts[r];
  }
  return Arrive(c, "alltoallv");
}

int Reducescatter(hvd_comm* c, const void* send, void* recv, const size_t* counts, hvd_dtype dtype, hvd_reduce_op op) {
  Slot s;
  s.kind = Kind::kReducescatter;
  s.send = send;
  s.counts = counts;
  s.dtype = dtype;
  s.op = op;
  int rc = Publish(c, s);
  if (rc != HVD_OK) return rc;
  Group& g = *c->group;
  size_t esize = hvd::dtype_size(dtype), offset = 0;
  for (int k = 0; k < c->rank; ++k) offset += counts[k];
  size_t n = counts[c->rank];
  const uint8_t* first = (const uint8_t*)g.slots[0].send + offset * esize;
  std::vector<uint8_t> acc(first, first + n * esize);
  for (int r = 1; r < g.size; ++r)
    hvd::reduce_into(dtype, op, acc.data(), (const uint8_t*)g.slots[r].send + offset * esize, n);
  rc = Arrive(c, "reducescatter");
  if (rc != HVD_OK) return rc;
  if (n) std::memcpy(recv, acc.data(), n * esize);
  return HVD_OK;
}

int Barrier(hvd_comm* c) {
  Slot s;
  s.kind = Kind::kBarrier;
  int rc = Publish(c, s);
  // A second barrier so nobody publishes its next slot while a peer still checks this one.
  return rc != HVD_OK ? rc : Arrive(c, "barrier");
}

int EagerOpen(hvd_comm* c, const size_t* bytes, int32_t channels) {
  Group& g = *c->group;
  std::lock_guard<std::mutex> lk(g.mu);
  g.eager_bytes.assign(bytes, bytes + channels);
  if (g.mail.empty())
    g.mail.assign((size_t)channels, std::vector<std::deque<std::vector<uint8_t>>>((size_t)g.size * g.size));
  return HVD_OK;
}

// The mailbox of messages from `from` to `to` on `channel`, or null with the failure recorded.
std::deque<std::vector<uint8_t>>* Mailbox(hvd_comm* c, const char* what, int32_t channel, int32_t from, int32_t to) {
  Group& g = *c->group;
  const int32_t peer = from == c->rank ? to : from;
  if (channel < 0 || channel >= (int32_t)g.mail.size() || peer < 0 || peer >= g.size || peer == c->rank) {
    Fail(c, HVD_ERR_INVALID_ARGUMENT,
         std::string("in-memory ") + what + ": no channel " + std::to_string(channel) + " to peer " +
             std::to_string(peer) + " of rank " + std::to_string(c->rank));
    return nullptr;
  }
  return &g.mail[channel][(size_t)to * g.size + from];
}

int EagerSend(hvd_comm* c, int32_t channel, int32_t peer, const void* buf, size_t bytes) {
  Group& g = *c->group;
  std::lock_guard<std::mutex> lk(g.mu);
  auto* box = Mailbox(c, "eager send", channel, c->rank, peer);
  if (!box) return HVD_ERR_INVALID_ARGUMENT;
  if (bytes == 0 || bytes > g.eager_bytes[channel] || box->size() >= 2) {
    return Fail(c, HVD_ERR_INVALID_ARGUMENT,
                "in-memory eager send from rank " + std::to_string(c->rank) + " to rank " + std::to_string(peer) +
                    " on channel " + std::to_string(channel) + ": " + std::to_string(bytes) + " bytes with " +
                    std::to_string(box->size()) + " messages not yet released (at most " +
                    std::to_string(g.eager_bytes[channel]) + " bytes and 2 messages)");
  }
  const uint8_t* data = static_cast<const uint8_t*>(buf);
  box->emplace_back(data, data + bytes);
  g.cv.notify_all();
  return HVD_OK;
}

int EagerWaitSent(hvd_comm* c, int32_t channel, int32_t peer) {  // copied when sent
  std::lock_guard<std::mutex> lk(c->group->mu);
  return Mailbox(c, "eager wait", channel, c->rank, peer) ? HVD_OK : HVD_ERR_INVALID_ARGUMENT;
}

int EagerReceive(hvd_comm* c, int32_t channel, int32_t peer, const void** data) {
  Group& g = *c->group;
  std::unique_lock<std::mutex> lk(g.mu);
  auto* box = Mailbox(c, "eager receive", channel, peer, c->rank);
  if (!box) return HVD_ERR_INVALID_ARGUMENT;
  const bool arrived = g.cv.wait_for(lk, std::chrono::milliseconds(c->timeout_ms),
                                     [&] { return !box->empty() || g.broken || g.departed[peer]; });
  if (!arrived) {
    return Fail(c, HVD_ERR_TIMEOUT,
                "in-memory eager receive on rank " + std::to_string(c->rank) + " timed out waiting for rank " +
                    std::to_string(peer));
  }
  if (box->empty()) {
    return Fail(c, HVD_ERR_PEER_LOST,
                g.broken ? g.broken_reason : "rank " + std::to_string(peer) + " left the communicator");
  }
  *data = box->front().data();
  return HVD_OK;
}

int EagerRelease(hvd_comm* c, int32_t channel, int32_t peer) {
  Group& g = *c->group;
  std::lock_guard<std::mutex> lk(g.mu);
  auto* box = Mailbox(c, "eager release", channel, peer, c->rank);
  if (!box) return HVD_ERR_INVALID_ARGUMENT;
  if (box->empty()) return Fail(c, HVD_ERR_INVALID_ARGUMENT, "in-memory eager release without a message");
  box->pop_front();
  return HVD_OK;
}

const hvd_backend_v1 kInMemoryBackend = {
    HVD_BACKEND_ABI_VERSION,
    sizeof(hvd_backend_v1),
    "inmemory",
    "1",
    HVD_DEVICE_CPU,
    0,
    HVD_CAP_IN_PROCESS_ONLY | HVD_CAP_LOW_PRECISION,
    CreateComm,
    DestroyComm,
    LastError,
    Allreduce,
    Allgatherv,
    Broadcast,
    Alltoallv,
    Reducescatter,
    Barrier,
    nullptr,
    nullptr,
};

}  // namespace

// No eager_receive_into: the engine's fallback (receive, copy, release) is exercised here; the Gloo
// backend's tests exercise the function itself.
const hvd_backend_ext_v1 kInMemoryExtensions = {
    sizeof(hvd_backend_ext_v1), 0, nullptr, EagerOpen, EagerSend, EagerWaitSent, EagerReceive, EagerRelease, nullptr,
};

extern "C" HVD_BACKEND_EXPORT const hvd_backend_v1* hvd_backend_v1_get(void) { return &kInMemoryBackend; }

extern "C" HVD_BACKEND_EXPORT const hvd_backend_ext_v1* hvd_backend_ext_v1_get(void) { return &kInMemoryExtensions; }
