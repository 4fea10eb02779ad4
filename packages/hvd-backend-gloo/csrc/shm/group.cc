// Setting up a group on the shared-memory region, and the steps members publish and wait for
// (group.h).
#include "shm/group.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>

#include "shm/proc.h"
#include "shm/region.h"

namespace hvd_shm {

struct alignas(64) Group::Control {
  std::atomic<uint32_t> step;      // the last step this member published; also its futex word
  std::atomic<uint32_t> sleepers;  // peers asleep on `step`, so that publishing wakes only when needed
  std::atomic<uint32_t> left;      // 1 once the member has closed its communicator
  int32_t pid;
  uint64_t start_time;  // field 22 of /proc/<pid>/stat: tells the member from a later process with its pid
  Signature signature;  // of its current collective, published with the collective's first step
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain 32-bit integers");

namespace {

constexpr uint64_t kMagic = 0x326d68732d647668ull;  // "hvd-shm2": control blocks with signatures
constexpr size_t kHeaderBytes = 64;
constexpr size_t kPage = 4096;
// Before sleeping, a waiter spins this long: a peer running on another core usually arrives
// within microseconds, and a futex sleep and wake-up costs tens.
constexpr auto kSpin = std::chrono::microseconds(30);
// A sleeping waiter wakes at least this often to check its deadline and whether the peer is alive.
constexpr auto kSleepSlice = std::chrono::milliseconds(10);

struct Header {
  uint64_t magic;
  uint32_t size;
  uint32_t reserved;
  uint64_t slot_bytes;
};

size_t AlignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word is shared between processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

bool StepReached(uint32_t seen, uint32_t step) { return (int32_t)(seen - step) >= 0; }  // wraps safely

// Whole cache lines (a multiple of every element size), and room for alltoallv's table of counts.
size_t UsableSlotBytes(size_t asked, int32_t members) {
  size_t least = AlignUp(std::max<size_t>(64, sizeof(size_t) * (size_t)members), 64);
  return std::max(least, asked / 64 * 64);
}

}  // namespace

std::unique_ptr<Group> Group::Connect(const Config& config, Store& store) {
  const int32_t n = config.size, rank = config.rank;
  const std::string me = std::to_string(rank);
  // Published also when empty (this member may not, or cannot tell): then no member uses it.
  const std::string identity = config.enabled ? HostIdentity(config.slot_bytes) : "";
  store.Set("shm/host/" + me, identity);
  // Decided from the store's contents alone (this member's own entry read back too), so that
  // every member decides alike.
  std::vector<std::string> published(n);
  for (int32_t r = 0; r < n; ++r) published[r] = store.Get("shm/host/" + std::to_string(r));
  bool together = !published[0].empty() && std::count(published.begin(), published.end(), published[0]) == n;
  if (!together) return nullptr;

  const size_t slot_bytes = UsableSlotBytes(config.slot_bytes, n);
  const size_t slots_offset = AlignUp(kHeaderBytes + sizeof(Control) * (size_t)n, kPage);
  const size_t bytes = slots_offset + slot_bytes * (size_t)n;
  RegionName created;  // rank 0 only
  std::string name;
  void* base = nullptr;
  if (rank == 0) {
    base = CreateRegion(config.region_prefix, bytes, &created.name);
    if (base) *static_cast<Header*>(base) = Header{kMagic, (uint32_t)n, 0, slot_bytes};
    name = created.name;
  }
  // From here the group owns the mapping (unmapped if anything below throws).
  std::unique_ptr<Group> group;
  auto adopt = [&] {
    if (!base) return;
    const Header* header = static_cast<const Header*>(base);
    if (header->magic != kMagic || header->size != (uint32_t)n || header->slot_bytes != slot_bytes) {
      munmap(base, bytes);
      return;
    }
    group.reset(new Group(config, base, bytes, slot_bytes));
    Control* mine = group->control(rank);
    mine->pid = (int32_t)getpid();
    mine->start_time = ReadProcessState(mine->pid).start_time;
  };
  if (rank == 0) {
    adopt();
    store.Set("shm/name", name);
  } else {
    name = store.Get("shm/name");
    if (!name.empty()) base = OpenRegion(name, bytes);
    adopt();
  }
  store.Set("shm/mapped/" + me, group ? "1" : "0");
  bool everyone = true;
  for (int32_t r = 0; r < n; ++r) everyone = store.Get("shm/mapped/" + std::to_string(r)) == "1" && everyone;
  // Every member has mapped the region (or given up): its name goes, the mappings keep it alive.
  created.Remove();
  if (!everyone) group.reset();
  return group;
}

Group::Group(const Config& config, void* base, size_t bytes, size_t slot_bytes)
    : config_(config),
      base_(base),
      bytes_(bytes),
      slot_bytes_(slot_bytes),
      slots_(static_cast<uint8_t*>(base) + AlignUp(kHeaderBytes + sizeof(Control) * (size_t)config.size, kPage)) {
  static_assert(sizeof(Control) == 64, "a control block is one cache line");
}

Group::~Group() {
  Control* mine = control(config_.rank);
  mine->left.store(1, std::memory_order_seq_cst);
  Futex(&mine->step, FUTEX_WAKE, INT_MAX, nullptr);  // sleepers re-check, and find this member gone
  munmap(base_, bytes_);
}

Group::Control* Group::control(int32_t member) const {
  return reinterpret_cast<Control*>(static_cast<uint8_t*>(base_) + kHeaderBytes) + member;
}

uint32_t Group::Publish() {
  Control* mine = control(config_.rank);
  mine->step.store(++step_, std::memory_order_seq_cst);  // release: the data written before it is visible
  if (mine->sleepers.load(std::memory_order_seq_cst) != 0) Futex(&mine->step, FUTEX_WAKE, INT_MAX, nullptr);
  return step_;
}

void Group::AwaitAll(uint32_t step) {
  for (int32_t m = 0; m < config_.size; ++m)
    if (m != config_.rank) WaitForStep(m, step);
}

void Group::Await(int32_t member, uint32_t step) { WaitForStep(member, step); }

void Group::AwaitSlotFree() { AwaitAll(slot_read_step_); }

void Group::OpenStep(const Signature& mine) {
  control(config_.rank)->signature = mine;  // plain stores, published by Publish()'s release
  AwaitAll(Publish());
  CheckSignatures(mine);
}

void Group::CheckSignatures(const Signature& mine) const {
  for (int32_t m = 0; m < config_.size; ++m) {
    const Signature& theirs = control(m)->signature;  // published with the step just awaited
    if (m == config_.rank || theirs == mine) continue;
    const std::string said = DescribeSignature(theirs), says = DescribeSignature(mine);
    // Counts split differently among the members, or another element size, read alike in words.
    const std::string beyond = said == says ? " (alike in size, but not in the counts or element size)" : "";
    throw Failure{HVD_ERR_INVALID_ARGUMENT,
                  "collective mismatch: " + MemberName(m) + " called " + said + ", this member " + says + beyond};
  }
}

void Group::WaitForStep(int32_t member, uint32_t step) {
  Control* peer = control(member);
  if (StepReached(peer->step.load(std::memory_order_acquire), step)) return;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Capped at a year: a timeout of 1e12 s must not overflow the clock.
  const auto deadline = start + std::min<std::chrono::milliseconds>(config_.timeout, std::chrono::hours(24 * 365));
  const auto spin_end = start + kSpin;
  for (unsigned i = 1;; ++i) {
    if (StepReached(peer->step.load(std::memory_order_acquire), step)) return;
    CpuRelax();
    if (i % 64 == 0 && Clock::now() >= spin_end) break;
  }
  auto next_liveness_check = Clock::now() + kSleepSlice;
  for (;;) {
    // The sleeper count goes up before the step is read again, and Publish() raises the step
    // before it reads the count (both sequentially consistent): either the publisher sees a
    // sleeper and wakes it, or the sleeper sees the new step and does not sleep.
    peer->sleepers.fetch_add(1, std::memory_order_seq_cst);
    uint32_t seen = peer->step.load(std::memory_order_seq_cst);
    auto now = Clock::now();
    if (!StepReached(seen, step) && now < deadline && !peer->left.load(std::memory_order_acquire)) {
      auto slice = std::min<Clock::duration>(kSleepSlice, deadline - now);
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(slice).count();
      timespec timeout{(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
      Futex(&peer->step, FUTEX_WAIT, seen, &timeout);
    }
    peer->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (StepReached(peer->step.load(std::memory_order_acquire), step)) return;
    now = Clock::now();
    // Reading /proc costs microseconds: once per sleep slice, not at every intermediate step.
    if (peer->left.load(std::memory_order_acquire) || now >= next_liveness_check) {
      next_liveness_check = now + kSleepSlice;
      std::string gone = PeerGone(member);
      if (!gone.empty()) FailWaiting(member, HVD_ERR_PEER_LOST, "lost the peer: " + gone);
    }
    if (now >= deadline) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g s", (double)config_.timeout.count() / 1000.0);
      const std::string setting = config_.timeout_setting.empty() ? "" : " (" + config_.timeout_setting + ")";
      std::string why = std::string("timed out after ") + seconds + setting + ": a peer did not take part in time";
      char state = ReadProcessState(peer->pid).state;
      if (state == 'T' || state == 't') why += "; its process (pid " + std::to_string(peer->pid) + ") is stopped";
      FailWaiting(member, HVD_ERR_TIMEOUT, why + " (shared-memory transport)");
    }
  }
}

std::string Group::PeerGone(int32_t member) const {
  const Control* peer = control(member);
  if (peer->left.load(std::memory_order_acquire)) {
    return "it closed its communicator (Horovod was shut down there, or its process is ending)";
  }
  ProcessState now = ReadProcessState(peer->pid);
  bool gone = now.gone || now.state == 'Z' || now.state == 'X' ||
              (peer->start_time && now.start_time && now.start_time != peer->start_time);  // pid reused
  return gone ? "its process (pid " + std::to_string(peer->pid) + ") has exited" : "";
}

void Group::FailWaiting(int32_t member, int status, const std::string& why) const {
  throw Failure{status, why, member};
}

std::string Group::MemberName(int32_t member) const {
  const bool known = member >= 0 && member < config_.size && (size_t)member < config_.job_ranks.size();
  return "rank " + std::to_string(known ? config_.job_ranks[member] : member);
}

}  // namespace hvd_shm
