#include "controller.h"

#include <cstring>

namespace hvdcore {
namespace {

constexpr size_t kFlagShutdown = 0;
constexpr size_t kFlagNeedCoordinator = 1;
constexpr size_t kHeaderBytes = 2;

bool IsCacheableType(OpType t) {
  return t == OpType::kAllreduce || t == OpType::kAllgather || t == OpType::kBroadcast || t == OpType::kAlltoall ||
         t == OpType::kReducescatter || t == OpType::kBarrier;
}

}  // namespace

Request Controller::MakeRequest(const ProcessSet& ps, const TensorEntry& e, bool invalidate) const {
  Request r;
  r.rank = ps.my_rank;
  r.type = e.type;
  r.dtype = e.input.dtype;
  r.op = e.op;
  r.root = e.root;
  r.device_kind = e.input.device_kind;
  r.prescale = e.prescale;
  r.postscale = e.postscale;
  r.name = e.name;
  r.shape = e.input.shape;
  r.group_id = e.group_id;
  r.group_size = e.group_size;
  r.invalidates_cache = invalidate;
  r.ranks = e.ranks;
  return r;
}

Status Controller::RunCycle(ProcessSet& ps, bool want_shutdown, CycleResult* out, NegotiationStats* stats) {
  const int32_t n = ps.size();
  const int64_t now = NowMicros();
  ++stats->cycles;

  // Sort what is pending into cache hits and requests for the coordinator.
  std::vector<Request> requests;
  std::vector<int32_t> hit_slots;
  for (const std::string& name : ps.arrival) {
    TensorEntry& e = *ps.pending.at(name);
    if (e.sent_to_coordinator) continue;
    bool invalidate = false;
    if (ps.cache.enabled() && IsCacheableType(e.type) && e.group_id < 0) {
      int32_t slot = -1;
      ResponseCache::Lookup found = ps.cache.Find(e, n, &slot);
      // A cached tensor that waits too long is renegotiated in full, so that the coordinator's
      // stall report can name the ranks that are missing it.
      bool stalled = ps.stall.enabled() && now - e.pending_since_us > ps.stall.check_us();
      if (found == ResponseCache::Lookup::kHit && !stalled) {
        hit_slots.push_back(slot);
        continue;
      }
      invalidate = found != ResponseCache::Lookup::kMiss;
    }
    requests.push_back(MakeRequest(ps, e, invalidate));
    e.sent_to_coordinator = true;
  }
  std::vector<uint8_t> encoded;
  if (!requests.empty()) EncodeRequests(requests, &encoded);

  // The coordinator checks for stalls locally; a shutdown decision needs step 2 to travel.
  std::string stall_error;
  bool coordinator = ps.my_rank == 0;
  if (coordinator && !ps.coordinator.empty() && ps.stall.Due(now)) {
    stall_error = ps.stall.Report(ps.coordinator.Stalled(now, ps.stall.check_us()), ps.id, ps.ranks, log_);
  }

  // Step 1: the control vector.
  const int32_t slots = ps.cache.num_slots();
  const size_t lengths_at = kHeaderBytes, slots_at = kHeaderBytes + 4 * (size_t)n;
  std::vector<uint8_t> control(slots_at + 2 * (size_t)slots, 0);
  control[kFlagShutdown] = want_shutdown ? 1 : 0;
  control[kFlagNeedCoordinator] = (!requests.empty() || !stall_error.empty()) ? 1 : 0;
  uint32_t my_len = (uint32_t)encoded.size();
  std::memcpy(&control[lengths_at + 4 * (size_t)ps.my_rank], &my_len, 4);
  for (int32_t s = 0; s < slots; ++s) control[slots_at + 2 * s] = ps.joined ? 0 : 1;  // "not ready"
  for (int32_t s : hit_slots) {
    control[slots_at + 2 * s] = 0;
    control[slots_at + 2 * s + 1] = 1;  // "someone has it"
  }
  Status st = ps.comm->Allreduce(control.data(), control.data(), control.size(), HVD_DTYPE_UINT8, HVD_REDUCE_MAX);
  if (!st.ok()) return st;

  if (control[kFlagShutdown]) {
    out->shutdown = true;
    return Status::Ok();
  }
  for (int32_t s = 0; s < slots; ++s) {
    if (control[slots_at + 2 * s] == 0 && control[slots_at + 2 * s + 1] == 1) {
      ps.cache.Touch(s);
      out->responses.push_back(ps.cache.Get(s));
      ++stats->cache_hits;
    }
  }
  if (!control[kFlagNeedCoordinator]) return Status::Ok();

  // Step 2: gather requests, let the coordinator decide, broadcast its response list.
  ++stats->coordinator_rounds;
  std::vector<size_t> counts(n);
  size_t total = 0;
  for (int32_t r = 0; r < n; ++r) {
    uint32_t len;
    std::memcpy(&len, &control[lengths_at + 4 * (size_t)r], 4);
    counts[r] = len;
    total += len;
  }
  std::vector<uint8_t> gathered(total);
  st = ps.comm->Allgatherv(encoded.data(), gathered.data(), counts, HVD_DTYPE_UINT8);
  if (!st.ok()) return st;

  std::vector<uint8_t> reply;
  if (coordinator) {
    ResponseList list;
    size_t offset = 0;
    for (int32_t r = 0; r < n; ++r) {
      if (counts[r]) {
        std::vector<Request> theirs;
        Status decoded = DecodeRequests(gathered.data() + offset, counts[r], &theirs);
        if (!decoded.ok()) return Status::Aborted("from rank " + std::to_string(ps.ranks[r]) + ": " + decoded.message());
        for (Request& q : theirs) q.rank = r;  // trust the transport's notion of the sender, not the message
        ps.coordinator.Add(theirs, now, ps.cache, &list);
      }
      offset += counts[r];
    }
    ps.coordinator.Collect(&list);
    list.shutdown_error = stall_error;
    EncodeResponseList(list, &reply);
  }
  uint64_t reply_len = reply.size();
  st = ps.comm->Broadcast(&reply_len, sizeof reply_len, HVD_DTYPE_UINT8, 0);
  if (!st.ok()) return st;
  reply.resize(reply_len);
  st = ps.comm->Broadcast(reply.data(), reply_len, HVD_DTYPE_UINT8, 0);
  if (!st.ok()) return st;

  ResponseList list;
  st = DecodeResponseList(reply.data(), reply.size(), &list);
  if (!st.ok()) return Status::Aborted("from the coordinator: " + st.message());
  for (int32_t slot : list.cache_erase) ps.cache.Erase(slot);
  for (Response& r : list.responses) {
    if (r.cacheable) ps.cache.Put(r);
    out->responses.push_back(std::move(r));
  }
  if (!list.shutdown_error.empty()) {
    out->shutdown = true;
    out->shutdown_error = std::move(list.shutdown_error);
  }
  return Status::Ok();
}

}  // namespace hvdcore
