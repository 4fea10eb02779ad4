#include "negotiation/controller.h"

#include <algorithm>
#include <cstring>

#include "horovod/hvd_reduce.hpp"
#include "negotiation/record_layout.h"

namespace hvdcore {
namespace {

bool IsCacheableType(OpType t) {
  return t == OpType::kAllreduce || t == OpType::kAllgather || t == OpType::kBroadcast || t == OpType::kAlltoall ||
         t == OpType::kReducescatter || t == OpType::kBarrier;
}

size_t ResponseBytes(const Response& r) {
  int64_t n = 1;
  for (int64_t d : r.shapes[0]) n *= d;
  return (size_t)n * hvd::dtype_size(r.dtype);
}

// What a member's inline bit for a cached response stands for in its record: an allreduce's data,
// a broadcast's data (only its root sets the bit), or a member's new sizes for an allgather or
// alltoall (response_cache.h).
inline size_t SizesSpan(OpType type, int32_t set_size) {
  return AlignUp((size_t)SizesPerMember(type, set_size) * sizeof(int64_t));
}
// Adasum's data never goes inline: every member would combine all the vectors itself, in another
// order than the engine's tree (execution/adasum.h), and the result's bits would depend on the size.
inline bool CarriesData(const Response& r) {
  return (r.type == OpType::kAllreduce && r.op != ReduceOp::kAdasum) || r.type == OpType::kBroadcast;
}
inline size_t InlineSpan(const Response& r, int32_t set_size) {
  return CarriesData(r) ? AlignUp(ResponseBytes(r)) : SizesSpan(r.type, set_size);
}
// An allgather's or alltoall's data: every member sends its own (the third bitmap says it did), of
// the length its sizes give (MemberInputBytes). It lies after the member's sizes for that slot when
// those travelled too.
inline bool GathersData(OpType type) { return type == OpType::kAllgather || type == OpType::kAlltoall; }

// An alltoall's blocks go ahead up to this size only. Every member copies each block out of the
// receive space, which costs more than the network crossing it saves once blocks are large
// (benchmarks/results/run-28-eager-messages.md).
constexpr size_t kAlltoallAheadBytes = 1024 * 1024;

// What this member would send eagerly for its cached `hit` (eager.h): one part per member, its own
// empty; none when the op does not go that way. A broadcast's root sends its tensor to every peer;
// an alltoall's member sends each peer its block, when every block for a peer holds data (so that
// every peer knows it has a message from this member) and none is over kAlltoallAheadBytes. Each
// part must fit the peers' space.
std::vector<EagerChannel::Part> EagerParts(const Response& r, const TensorEntry& e, const std::vector<int64_t>& mine,
                                           int32_t n, int32_t me, size_t capacity) {
  std::vector<EagerChannel::Part> parts(n);
  if (r.type == OpType::kBroadcast) {
    const size_t bytes = ResponseBytes(r);
    if (r.root != me || bytes == 0 || bytes > capacity || !e.input.data) return {};
    for (int32_t p = 0; p < n; ++p)
      if (p != me) parts[p] = {e.input.data, bytes};
    return parts;
  }
  if (r.type != OpType::kAlltoall || !e.input.data) return {};
  const size_t row_bytes = (size_t)RowElements(r.shapes[0]) * hvd::dtype_size(r.dtype);
  size_t offset = 0;
  for (int32_t p = 0; p < n; ++p) {
    const size_t bytes = (size_t)mine[p] * row_bytes;
    if (p != me) {
      if (bytes == 0 || bytes > std::min(capacity, kAlltoallAheadBytes)) return {};
      parts[p] = {static_cast<const uint8_t*>(e.input.data) + offset, bytes};
    }
    offset += bytes;
  }
  return parts;
}

// Whether some member still has work once the slots in `ran` have run: a member that was busy is
// done only if all its work was cache hits (kOnlyHits) and each of them ran. Right after an op
// completes, every member is then seen idle and cycles at the idle pace; cycling quickly instead
// (while a caller was still counted as blocked on that op) started idle cycles that the next op,
// submitted moments later, found under way on one member and not on another, so that it took a
// second cycle (benchmarks/results/run-22-no-quick-cycle-after-an-op.md).
bool StillBusy(const std::vector<uint8_t>& records, const RecordLayout& layout, int32_t n, int32_t slots,
               const std::vector<bool>& ran) {
  for (int32_t m = 0; m < n; ++m) {
    const uint8_t* rec = &records[(size_t)m * layout.size];
    if (!(rec[RecordLayout::kFlagsAt] & kBusy)) continue;
    if (!(rec[RecordLayout::kFlagsAt] & kOnlyHits)) return true;
    for (int32_t s = 0; s < slots; ++s)
      if (layout.Bit(rec, SlotBits::kHave, s) && !ran[s]) return true;
  }
  return false;
}

}  // namespace

size_t Controller::MostInline(int32_t n) const {
  // The base space (which keeps room for sizes beside the data) and a share of the bound on all
  // records; none where the space is off.
  return inline_bytes_ == 0 ? 0 : (size_t)inline_bytes_ + AlignUp((size_t)inline_max_bytes_ / (size_t)n);
}

size_t Controller::MostRecordBytes(const ProcessSet& ps) const {
  const size_t inline_space = std::max((size_t)inline_bytes_, MostInline(ps.size()));
  return RecordLayout::InlineAt(ps.cache.capacity()) + AlignUp(inline_space);
}

// Step 1's exchange: every member's record, in member order. Over the records channel where it is
// open (eager.h), else one allgather. Every member's record has the same size, so every member
// takes the same way. On the channel only the part in use travels (its length is in the record):
// the inline space is sized for the most that a cycle may carry, and most cycles carry far less
// (none at all when their ops are too large to go inline), yet each sent all of it, 64 KiB and
// more to every peer. The receiver fills the rest with the zeros the sender's record holds there.
Status Controller::GatherRecords(ProcessSet& ps, const std::vector<uint8_t>& record, std::vector<uint8_t>* all) {
  const int32_t n = ps.size();
  const size_t size = record.size();
  if (ps.records.capacity() < size) {
    return ps.comm->Allgatherv(record.data(), all->data(), std::vector<size_t>(n, size), HVD_DTYPE_UINT8);
  }
  const uint32_t used = RecordLayout::Read<uint32_t>(record.data(), RecordLayout::kUsedAt);
  Status st = ps.records.Send(0, std::vector<EagerChannel::Part>(n, {record.data(), used}));
  if (!st.ok()) return st;
  std::memcpy(all->data() + (size_t)ps.my_rank * size, record.data(), size);
  const size_t least = RecordLayout::InlineAt(ps.cache.num_slots());  // the header and the bitmaps
  for (int32_t m = 0; m < n && st.ok(); ++m) {
    if (m == ps.my_rank) continue;
    uint8_t* dst = all->data() + (size_t)m * size;
    st = ps.records.Take(m, [&](const uint8_t* message) {
      const uint32_t sent = RecordLayout::Read<uint32_t>(message, RecordLayout::kUsedAt);
      if (sent < least || sent > size) {
        return Status::Aborted("the negotiation record of rank " + std::to_string(ps.ranks[m]) + " says it holds " +
                               std::to_string(sent) + " bytes; this cycle's records hold " + std::to_string(least) +
                               " to " + std::to_string(size));
      }
      std::memcpy(dst, message, sent);
      std::memset(dst + sent, 0, size - sent);
      return Status::Ok();
    });
  }
  return st.ok() ? ps.records.Settle() : st;
}

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
  r.refusal = e.refusal;
  if (e.type == OpType::kAlltoall) r.splits = MemberSizes(e, ps.size());
  return r;
}

// One cycle, in phases: sort this member's pending work, write its record, exchange the records,
// read every member's flags and eager messages, decide the cache slots that are ready, ask the
// coordinator where someone needs it, and settle eager messages whose slot changed.
Status Controller::RunCycle(ProcessSet& ps, StopWish stop, bool work_elsewhere, CycleResult* out,
                            NegotiationStats* stats, const TunedSettings& settings) {
  const int64_t now = NowMicros();
  ++stats->cycles;
  // This cycle's inline space, and the most it may grow to.
  const size_t most_inline = MostInline(ps.size());
  const size_t inline_space = ps.inline_space.Bytes((size_t)inline_bytes_);

  PendingWork work = SortPending(ps, now, inline_space);
  // The coordinator checks for stalls locally; a shutdown decision needs step 2 to travel.
  std::string stall_error;
  if (ps.my_rank == 0 && !ps.coordinator.empty() && ps.stall.Due(now)) {
    std::vector<StalledTensor> stalled = ps.coordinator.Stalled(now, ps.stall.check_us());
    stall_error = ps.stall.Report(stalled, ps.id, ps.ranks, log_);
    if (job_stats_ && !stalled.empty()) {
      std::vector<std::string> names;
      for (const StalledTensor& t : stalled) names.push_back(t.name);
      job_stats_->RecordStall(ps.id, names);
    }
  }

  // Step 1: every member's record. Its size depends only on state every member shares.
  const RecordLayout layout(ps.cache.num_slots(), inline_space);
  std::vector<uint8_t> record(layout.size, 0);
  Status st =
      WriteRecord(ps, stop, work_elsewhere, work, !stall_error.empty(), layout, inline_space, record.data(), stats);
  if (!st.ok()) return st;
  if (settings.epoch) WriteSettings(record.data(), settings);
  out->records.resize(layout.size * (size_t)ps.size());
  st = GatherRecords(ps, record, &out->records);
  if (!st.ok()) return st;
  out->settings = ReadSettings(out->records.data());  // member 0's
  if (ps.records.capacity() >= layout.size) {
    ++stats->eager_record_cycles;
    stats->record_bytes_sent +=
        (uint64_t)RecordLayout::Read<uint32_t>(record.data(), RecordLayout::kUsedAt) * (uint64_t)(ps.size() - 1);
  }

  const MemberFlags flags = ReadFlags(ps, layout, out);
  if (out->shutdown) {
    // Every entry fails next, so this member's eager messages must have left their tensors. A
    // failure here is the transport's, and the stop goes ahead regardless.
    if (ps.eager.sent_slot() >= 0) (void)ps.eager.Settle();
    return Status::Ok();
  }
  EagerClaims eager;
  st = ReadEagerClaims(ps, layout, out->records, &eager);
  if (!st.ok()) return st;
  std::vector<bool> ran;  // the slots whose op runs (or completes inline) this cycle
  size_t inline_wanted = 0;
  out->responses.reserve(work.hits.size());
  st = DecideCacheSlots(ps, layout, flags.joined, most_inline, &eager, out, stats, &ran, &inline_wanted);
  if (!st.ok()) return st;
  out->anyone_busy = StillBusy(out->records, layout, ps.size(), ps.cache.num_slots(), ran);
  if (out->anyone_busy) ++stats->busy_cycles;
  ps.inline_space.Observe(inline_wanted, most_inline);
  if (ps.id == 0) stats->inline_space = ps.inline_space.Bytes((size_t)inline_bytes_);

  if (flags.need_coordinator) {
    ++stats->coordinator_rounds;
    std::vector<size_t> counts(ps.size());
    for (int32_t m = 0; m < ps.size(); ++m) {
      counts[m] = RecordLayout::Read<uint32_t>(&out->records[(size_t)m * layout.size], RecordLayout::kRequestLenAt);
    }
    st = Coordinate(ps, work.encoded, counts, stall_error, now, out);
    if (!st.ok()) return st;
    if (out->shutdown && ps.eager.sent_slot() >= 0) (void)ps.eager.Settle();  // as above: entries fail next
  }
  return SettleOrphanedEager(ps, eager.slot_of, eager.generation, stats);
}

// Sorts what is pending into cache hits and requests for the coordinator. An allgather or alltoall
// hit whose sizes for this member changed carries its new sizes in the record's inline area
// (`sizes_bytes` of it, taken before any allreduce data), or, when they do not fit, is negotiated
// again like a changed tensor (response_cache.h says why a cached response is never stale).
Controller::PendingWork Controller::SortPending(ProcessSet& ps, int64_t now, size_t inline_space) const {
  const int32_t n = ps.size();
  PendingWork work;
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
      bool fits = true;
      if (found == ResponseCache::Lookup::kHit && !stalled && !SizesMatch(e, ps.cache.Get(slot), n, ps.my_rank)) {
        const size_t span = SizesSpan(e.type, n);
        fits = work.sizes_bytes + span <= inline_space;
        if (fits) {
          work.sizes_bytes += span;
          if (work.new_sizes.size() <= (size_t)slot) work.new_sizes.resize((size_t)slot + 1, false);
          work.new_sizes[slot] = true;
        }
      }
      if (found == ResponseCache::Lookup::kHit && !stalled && fits) {
        work.hits.emplace_back(slot, &e);
        continue;
      }
      invalidate = found != ResponseCache::Lookup::kMiss;
    }
    work.requests.push_back(MakeRequest(ps, e, invalidate));
    e.sent_to_coordinator = true;
  }
  if (!work.requests.empty()) EncodeRequests(work.requests, &work.encoded);
  std::sort(work.hits.begin(), work.hits.end());
  return work;
}

// This member's record: its flags, its requests' length, a bit for each cache hit, and inline the
// sizes and data that fit (packed in slot order); hits whose data does not go inline may go ahead
// as eager messages (eager.h), which the record then names.
Status Controller::WriteRecord(ProcessSet& ps, StopWish stop, bool work_elsewhere, const PendingWork& work,
                               bool stalled, const RecordLayout& layout, size_t inline_space, uint8_t* record,
                               NegotiationStats* stats) const {
  const int32_t n = ps.size();
  const bool asks_coordinator = !work.requests.empty() || stalled;
  record[RecordLayout::kFlagsAt] =
      (uint8_t)((stop != StopWish::kNone ? kShutdown : 0) | (stop == StopWish::kStopFailed ? kFailed : 0) |
                (asks_coordinator ? kNeedCoordinator : 0) | (ps.joined ? kJoined : 0) |
                (work_elsewhere || !ps.pending.empty() ? kBusy : 0) |
                (!work_elsewhere && !asks_coordinator && work.hits.size() == ps.pending.size() ? kOnlyHits : 0));
  RecordLayout::Write<uint32_t>(record, RecordLayout::kRequestLenAt, (uint32_t)work.encoded.size());
  uint8_t* inline_area = record + layout.inline_at;
  size_t inline_used = 0, data_used = 0;  // inline_used: data and sizes, packed in slot order
  const size_t data_budget = inline_space - work.sizes_bytes;
  // A member that joined only answers for tensors it lacks: it sends nothing ahead.
  const bool may_send_eagerly = ps.eager.capacity() > 0 && !ps.joined;
  for (const auto& [slot, entry] : work.hits) {
    layout.SetBit(record, SlotBits::kHave, slot);
    const Response& r = ps.cache.Get(slot);
    const TensorEntry& e = *entry;
    const std::vector<int64_t> mine = MemberSizes(e, n);  // empty but for allgathers and alltoalls
    // Data already sent eagerly never travels again inline, which the space may have grown to.
    const bool sent_eagerly = ps.eager.sent_slot() == slot;
    // Device data is staged when the op executes (execution/device_staging.h), never read here.
    const bool host_data = e.input.device_kind == HVD_DEVICE_CPU;
    bool inlined = false;
    if ((size_t)slot < work.new_sizes.size() && work.new_sizes[slot]) {
      std::memcpy(inline_area + inline_used, mine.data(), mine.size() * sizeof(int64_t));
      layout.SetBit(record, SlotBits::kInline, slot);
      inline_used += SizesSpan(r.type, n);
    }
    if (host_data && GathersData(r.type)) {
      const size_t bytes = MemberInputBytes(r, mine.data(), n);
      const size_t held = e.input.data ? (size_t)e.input.num_elements() * hvd::dtype_size(r.dtype) : 0;
      if (!sent_eagerly && bytes == held && data_used + AlignUp(bytes) <= data_budget) {
        if (bytes) std::memcpy(inline_area + inline_used, e.input.data, bytes);
        layout.SetBit(record, SlotBits::kGathered, slot);
        inline_used += AlignUp(bytes);
        data_used += AlignUp(bytes);
        inlined = true;
      }
    }
    size_t bytes = ResponseBytes(r);
    // A broadcast's data comes from its root alone: the others have nothing to send.
    bool sends_data = CarriesData(r) && (r.type != OpType::kBroadcast || r.root == ps.my_rank);
    if (host_data && !GathersData(r.type) && sends_data && !sent_eagerly && data_used + AlignUp(bytes) <= data_budget) {
      uint8_t* dst = inline_area + inline_used;
      if (bytes) std::memcpy(dst, e.input.data, bytes);
      if (r.type == OpType::kAllreduce && r.prescale != 1.0)
        hvd::scale(r.dtype, dst, bytes / hvd::dtype_size(r.dtype), r.prescale);
      layout.SetBit(record, SlotBits::kInline, slot);
      inline_used += AlignUp(bytes);
      data_used += AlignUp(bytes);
      inlined = true;
    }
    if (host_data && !inlined && may_send_eagerly && ps.eager.sent_slot() < 0) {
      std::vector<EagerChannel::Part> parts = EagerParts(r, e, mine, n, ps.my_rank, ps.eager.capacity());
      if (!parts.empty()) {
        Status sent = ps.eager.Send(slot, parts);
        if (!sent.ok()) return sent;
        ++stats->eager_sends;
      }
    }
  }
  RecordLayout::Write<int32_t>(record, RecordLayout::kEagerSlotAt, ps.eager.sent_slot());
  RecordLayout::Write<uint32_t>(record, RecordLayout::kUsedAt, (uint32_t)(layout.inline_at + inline_used));
  return Status::Ok();
}

// What the gathered records' flags say: who stops (into `out`), who is busy, who joined, and
// whether anyone needs the coordinator.
Controller::MemberFlags Controller::ReadFlags(const ProcessSet& ps, const RecordLayout& layout, CycleResult* out) {
  MemberFlags flags;
  flags.joined.resize(ps.size());
  for (int32_t m = 0; m < ps.size(); ++m) {
    const uint8_t f = out->records[(size_t)m * layout.size + RecordLayout::kFlagsAt];
    if (f & kShutdown) {
      out->shutdown = true;
      out->shutdown_by.push_back(ps.ranks[m]);
      if (f & kFailed) out->failed_by.push_back(ps.ranks[m]);
    }
    flags.need_coordinator = flags.need_coordinator || (f & kNeedCoordinator);
    out->anyone_busy = out->anyone_busy || (f & kBusy);
    flags.joined[m] = f & kJoined;
  }
  return flags;
}

// Whose eager messages are outstanding, for which slot, and that slot's generation now: a slot
// that changes before it runs (erased or replaced, below or by the coordinator) takes its
// messages with it (SettleOrphanedEager).
Status Controller::ReadEagerClaims(ProcessSet& ps, const RecordLayout& layout, const std::vector<uint8_t>& records,
                                   EagerClaims* eager) {
  const int32_t n = ps.size(), slots = ps.cache.num_slots();
  eager->slot_of.assign(n, -1);
  eager->generation.assign(n, 0);
  for (int32_t m = 0; m < n; ++m) {
    const int32_t slot = RecordLayout::Read<int32_t>(&records[(size_t)m * layout.size], RecordLayout::kEagerSlotAt);
    if (slot < -1 || slot >= slots) {
      return Status::Aborted("the negotiation record of rank " + std::to_string(ps.ranks[m]) +
                             " names eager data for cache slot " + std::to_string(slot) + ", which does not exist");
    }
    eager->slot_of[m] = slot;
    if (slot >= 0) eager->generation[m] = ps.cache.Generation(slot);
  }
  return Status::Ok();
}

// Ready: someone has it and every member has it or has joined. Inline: every member that has
// it sent its data (a broadcast: its root sent it); each member's inline data is packed in slot
// order. For an allgather or alltoall, a member's inline bit means that it sent its new sizes,
// and its data bit (the third bitmap) that its data follows them. Ready slots become responses to
// execute, or completions from the records' inline data; `inline_wanted` is what they would take
// of the inline space (inline_space.h).
Status Controller::DecideCacheSlots(ProcessSet& ps, const RecordLayout& layout, const std::vector<bool>& joined,
                                    size_t most_inline, EagerClaims* eager, CycleResult* out, NegotiationStats* stats,
                                    std::vector<bool>* ran, size_t* inline_wanted) const {
  const int32_t n = ps.size(), slots = ps.cache.num_slots();
  const bool count_arrivals = job_stats_ && ps.my_rank == 0;
  const int64_t now = count_arrivals ? NowMicros() : 0;
  std::vector<bool> has_bits(count_arrivals ? n : 0);
  auto rec = [&](int32_t m) { return &out->records[(size_t)m * layout.size]; };
  std::vector<size_t> inline_offset(n, 0);
  std::vector<int64_t> sent;  // a member's sizes read from its record (reused across members)
  ran->assign(slots, false);
  for (int32_t s = 0; s < slots; ++s) {
    const Response& r = ps.cache.Get(s);
    const bool gathers = GathersData(r.type);
    bool someone = false, everyone = true, all_inline = true, all_gathered = gathers;
    for (int32_t m = 0; m < n; ++m) {
      bool has = layout.Bit(rec(m), SlotBits::kHave, s);
      if (count_arrivals) has_bits[m] = has;
      someone = someone || has;
      everyone = everyone && (has || joined[m]);
      // A joined rank that still holds the tensor contributes real data: it must have sent it.
      all_inline = all_inline && ((joined[m] && !has) || layout.Bit(rec(m), SlotBits::kInline, s));
      all_gathered = all_gathered && ((joined[m] && !has) || layout.Bit(rec(m), SlotBits::kGathered, s));
    }
    if (someone && everyone && r.type == OpType::kBroadcast && joined[r.root] &&
        !layout.Bit(rec(r.root), SlotBits::kHave, s)) {
      // The root has joined: the coordinator must report it. Every rank drops the entry (the
      // decision uses only gathered records), so the holders renegotiate it next cycle.
      for (int32_t m = 0; m < n; ++m)
        if (layout.Bit(rec(m), SlotBits::kInline, s)) inline_offset[m] += InlineSpan(r, n);
      ps.cache.Erase(s);
      continue;
    }
    const int32_t per = SizesPerMember(r.type, n);
    InlineCompletion completion;
    const bool inline_reduction = someone && everyone && all_inline && r.type == OpType::kAllreduce;
    // Past the joined-root check above, a ready broadcast's root holds the tensor.
    const bool inline_broadcast =
        someone && everyone && r.type == OpType::kBroadcast && layout.Bit(rec(r.root), SlotBits::kInline, s);
    const bool inline_gather = someone && everyone && all_gathered;
    if (inline_reduction || inline_broadcast || inline_gather) completion.parts.resize(n, nullptr);
    std::vector<std::pair<int32_t, const uint8_t*>> sent_sizes;  // members' new sizes, where they lie
    for (int32_t m = 0; m < n; ++m) {
      const bool sized = layout.Bit(rec(m), SlotBits::kInline, s),
                 gathered = layout.Bit(rec(m), SlotBits::kGathered, s);
      if (!sized && !gathered) continue;
      const uint8_t* at = rec(m) + layout.inline_at + inline_offset[m];
      if (sized) {
        if (per > 0) sent_sizes.emplace_back(m, at);
        if (!completion.parts.empty() && !gathers) completion.parts[m] = at;
        inline_offset[m] += InlineSpan(r, n);
      }
      if (gathered) {  // its length follows from its sizes: the ones it sent, or the cached ones
        const int64_t* sizes = &r.tensor_sizes[(size_t)per * m];
        if (sized) {  // copied out: a record's bytes are not int64_t objects
          sent.resize((size_t)per);
          std::memcpy(sent.data(), at, sent.size() * sizeof(int64_t));
          sizes = sent.data();
        }
        if (!completion.parts.empty()) completion.parts[m] = rec(m) + layout.inline_at + inline_offset[m];
        inline_offset[m] += AlignUp(MemberInputBytes(r, sizes, n));
      }
      if (inline_offset[m] > layout.size - layout.inline_at) {  // lengths from a record must stay inside it
        return Status::Aborted("the negotiation record of rank " + std::to_string(ps.ranks[m]) +
                               " holds less inline data than its sizes for tensor '" + r.names[0] + "' say");
      }
    }
    // The set's rank 0 notes who arrived when (the job-end report's stragglers).
    if (count_arrivals && someone)
      ps.arrivals.Observe(r.names[0], has_bits, everyone, now, ps.id, ps.ranks, job_stats_);
    if (!someone || !everyone) continue;
    (*ran)[s] = true;
    ps.cache.Touch(s);
    ++stats->cache_hits;
    Response now = r;
    if (per > 0) {
      // Every member's sizes as they are in this cycle: the new ones that came with the bits go
      // into the cache (on every member alike, from the same records); members that joined without
      // the tensor contribute nothing this time.
      std::vector<int64_t> row((size_t)per);
      for (const auto& ms : sent_sizes) {
        std::memcpy(row.data(), ms.second, row.size() * sizeof(int64_t));
        ps.cache.SetMemberSizes(s, ms.first, n, row.data());
      }
      now = ps.cache.Get(s);
      for (int32_t m = 0; m < n; ++m) {
        if (joined[m] && !layout.Bit(rec(m), SlotBits::kHave, s))
          std::fill_n(now.tensor_sizes.begin() + (size_t)per * m, per, 0);
      }
    }
    for (int32_t m = 0; m < n; ++m) {
      if (eager->slot_of[m] != s) continue;
      // Only a broadcast's root and an alltoall's members send ahead, and never inline as well.
      const bool may = r.type == OpType::kAlltoall || (r.type == OpType::kBroadcast && m == r.root);
      if (!may || !completion.parts.empty()) {
        return Status::Aborted("the negotiation record of rank " + std::to_string(ps.ranks[m]) +
                               " names eager data for tensor '" + r.names[0] +
                               "', which that rank does not send ahead");
      }
      now.eager_from.push_back(m);  // the executor takes these messages
      eager->slot_of[m] = -1;
    }
    // What this op would take of a member's inline space: its data (an allgather's or alltoall's:
    // the largest member's, after its sizes).
    size_t wanted = CarriesData(r) ? InlineSpan(r, n) : 0;
    for (int32_t m = 0; gathers && m < n; ++m)
      wanted = std::max(wanted,
                        SizesSpan(r.type, n) + AlignUp(MemberInputBytes(now, &now.tensor_sizes[(size_t)per * m], n)));
    if (wanted <= most_inline) *inline_wanted += wanted;
    if (completion.parts.empty()) {
      out->responses.push_back(std::move(now));
      continue;
    }
    completion.response = std::move(now);
    out->inline_completions.push_back(std::move(completion));
    ++(inline_broadcast               ? stats->inline_broadcasts
       : inline_reduction             ? stats->inline_reductions
       : r.type == OpType::kAllgather ? stats->inline_allgathers
                                      : stats->inline_alltoalls);
  }
  return Status::Ok();
}

// Eager messages whose op did not run this cycle stay where they are, unless their cache slot
// changed: then no cycle will ever run them. Every member sees the same records and the same cache,
// so the receivers drop what the sender stops waiting for; its entry goes the usual way.
Status Controller::SettleOrphanedEager(ProcessSet& ps, const std::vector<int32_t>& eager_of,
                                       const std::vector<uint64_t>& generation, NegotiationStats* stats) {
  for (int32_t m = 0; m < ps.size(); ++m) {
    if (eager_of[m] < 0 || ps.cache.Generation(eager_of[m]) == generation[m]) continue;
    Status st = m == ps.my_rank ? ps.eager.Settle() : ps.eager.Take(m, nullptr, 0);
    if (!st.ok()) return st;
    ++stats->eager_drops;
  }
  return Status::Ok();
}

// Step 2: gather requests, let the coordinator decide, broadcast its response list.
Status Controller::Coordinate(ProcessSet& ps, const std::vector<uint8_t>& encoded, const std::vector<size_t>& counts,
                              const std::string& stall_error, int64_t now, CycleResult* out) {
  const int32_t n = ps.size();
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<uint8_t> gathered(total);
  Status st = ps.comm->Allgatherv(encoded.data(), gathered.data(), counts, HVD_DTYPE_UINT8);
  if (!st.ok()) return st;

  std::vector<uint8_t> reply;
  if (ps.my_rank == 0) {
    ResponseList list;
    size_t offset = 0;
    for (int32_t r = 0; r < n; ++r) {
      if (counts[r]) {
        std::vector<Request> theirs;
        Status decoded = DecodeRequests(gathered.data() + offset, counts[r], &theirs);
        if (!decoded.ok()) {  // still broadcast: every member must learn why the job stops
          list.shutdown_error = "from rank " + std::to_string(ps.ranks[r]) + ": " + decoded.message();
          break;
        }
        for (Request& q : theirs) q.rank = r;  // trust the transport's notion of the sender, not the message
        ps.coordinator.Add(theirs, now, ps.cache, &list);
      }
      offset += counts[r];
    }
    if (list.shutdown_error.empty()) {
      ps.coordinator.Collect(&list);
      list.shutdown_error = stall_error;
      for (const ArrivalSpread& a : ps.coordinator.TakeArrivals()) {
        if (job_stats_) job_stats_->RecordArrival(ps.id, a.tensor, ps.ranks[a.last], a.late_us);
      }
    } else {
      list.responses.clear();
      list.cache_erase.clear();
    }
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
