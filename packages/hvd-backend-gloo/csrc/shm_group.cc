// Setting up the shared-memory region, and the steps members publish and wait for (shm_group.h).
#include "shm_group.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "comm.h"
#include "store_adapter.h"

namespace hvd_gloo {

struct alignas(64) ShmGroup::Control {
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
// 4 MiB per member: big enough that a large allreduce moves in few pieces, small enough for a
// container's default 64 MiB /dev/shm with a few communicators of a few members.
constexpr size_t kDefaultSlotBytes = 4u << 20;
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

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string Link(const char* path) {
  char buf[128];
  ssize_t n = readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, (size_t)n) : std::string();
}

// Off as hvd-core reads its boolean settings: 0, false, no or off, in any case.
bool Disabled() {
  const char* env = std::getenv("HOROVOD_GLOO_SHARED_MEMORY");
  if (!env) return false;
  for (const char* off : {"0", "false", "no", "off"})
    if (strcasecmp(env, off) == 0) return true;
  return false;
}

// The slot size asked for (a plain number of bytes), or the default when the setting is absent or
// not such a number. Every member uses it (the host identity includes it).
size_t SlotBytes() {
  const char* env = std::getenv("HOROVOD_GLOO_SHARED_MEMORY_SLOT_BYTES");
  if (!env || !*env) return kDefaultSlotBytes;
  char* end = nullptr;
  errno = 0;
  unsigned long long bytes = std::strtoull(env, &end, 10);
  if (errno || *end || env[0] == '-') return kDefaultSlotBytes;
  return (size_t)bytes;
}

// Whole cache lines (a multiple of every element size), and room for alltoallv's table of counts.
size_t UsableSlotBytes(size_t asked, int32_t members) {
  size_t least = AlignUp(std::max<size_t>(64, sizeof(size_t) * (size_t)members), 64);
  return std::max(least, asked / 64 * 64);
}

// What members must share to map one region: the same running kernel (boot id), the same PID
// namespace (liveness is checked through /proc/<pid>), the same mount and IPC namespaces (the
// same /dev/shm), the same user (the region is 0600), and the same slot size. Empty when off.
std::string HostIdentity() {
  if (Disabled()) return "";
  std::string boot = ReadFirstLine("/proc/sys/kernel/random/boot_id");
  std::string pid_ns = Link("/proc/self/ns/pid"), mnt_ns = Link("/proc/self/ns/mnt"), ipc_ns = Link("/proc/self/ns/ipc");
  if (boot.empty() || pid_ns.empty() || mnt_ns.empty()) return "";
  return boot + "|" + pid_ns + "|" + mnt_ns + "|" + ipc_ns + "|uid " + std::to_string(getuid()) + "|slot " +
         std::to_string(SlotBytes());
}

// What /proc/<pid>/stat says of a process: gone only when the kernel no longer knows the pid. Any
// other failure to read it (descriptors exhausted, /proc mounted with hidepid, a command name
// holding a newline) leaves the process presumed alive: a timeout, not a false report of death.
struct ProcessState {
  bool gone = false;
  char state = 0;           // field 3: R, S, D, T (stopped), t (traced), Z (zombie), X (dead); 0 if unread
  uint64_t start_time = 0;  // field 22, in clock ticks since boot; 0 if unread
};

ProcessState ReadProcessState(int32_t pid) {
  ProcessState out;
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.gone = errno == ENOENT || errno == ESRCH;
    return out;
  }
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return out;
  std::string stat(buf, (size_t)n);
  size_t close_paren = stat.rfind(')');  // the command name, in parentheses, may hold anything
  if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) return out;
  std::istringstream fields(stat.substr(close_paren + 2));
  std::string skipped;
  fields >> out.state;
  for (int field = 4; field <= 21 && fields >> skipped; ++field) {
  }
  if (!(fields >> out.start_time)) out.start_time = 0;
  return out;
}

std::vector<char> Bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }
std::string String(const std::vector<char>& v) { return std::string(v.begin(), v.end()); }

// Rank 0 creates the region (0600, a random name) and reserves its memory up front, so that a full
// /dev/shm is found out here rather than by SIGBUS in a collective. Null and "" on failure.
void* CreateRegion(size_t bytes, std::string* name) {
  uint64_t random = 0;
  try {
    std::random_device entropy;
    random = ((uint64_t)entropy() << 32) | entropy();
  } catch (const std::exception&) {  // no entropy source: the clock and an address still make it unique here
    random = (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count() ^ (uint64_t)(uintptr_t)&random;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "/hvd-gloo-%d-%016llx", (int)getpid(), (unsigned long long)random);
  int fd = shm_open(buf, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return nullptr;
  void* base = MAP_FAILED;
  if (posix_fallocate(fd, 0, (off_t)bytes) == 0) {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(buf);
    return nullptr;
  }
  *name = buf;
  return base;
}

void* OpenRegion(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return nullptr;
  struct stat st {};
  void* base = MAP_FAILED;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size == bytes) {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  return base == MAP_FAILED ? nullptr : base;
}

}  // namespace

namespace {

// Rank 0's region name until it is removed: removed however Connect ends (a store call may throw
// while peers map it), so that nothing is ever left in /dev/shm.
struct RegionName {
  std::string name;
  ~RegionName() { Remove(); }
  void Remove() {
    if (!name.empty()) shm_unlink(name.c_str());
    name.clear();
  }
};

}  // namespace

std::unique_ptr<ShmGroup> ShmGroup::Connect(hvd_comm* comm, StoreAdapter& store) {
  const int32_t n = comm->size, rank = comm->rank;
  const std::string me = std::to_string(rank);
  const std::string identity = HostIdentity();
  store.set("shm/host/" + me, Bytes(identity));
  // Decided from the store's contents alone (this member's own entry read back too), so that
  // every member decides alike.
  std::vector<std::string> published(n);
  for (int32_t r = 0; r < n; ++r) published[r] = String(store.get("shm/host/" + std::to_string(r)));
  bool together = !published[0].empty() && std::count(published.begin(), published.end(), published[0]) == n;
  if (!together) return nullptr;

  const size_t slot_bytes = UsableSlotBytes(SlotBytes(), n);
  const size_t slots_offset = AlignUp(kHeaderBytes + sizeof(Control) * (size_t)n, kPage);
  const size_t bytes = slots_offset + slot_bytes * (size_t)n;
  RegionName created;  // rank 0 only
  std::string name;
  void* base = nullptr;
  if (rank == 0) {
    base = CreateRegion(bytes, &created.name);
    if (base) *static_cast<Header*>(base) = Header{kMagic, (uint32_t)n, 0, slot_bytes};
    name = created.name;
  }
  // From here the group owns the mapping (unmapped if anything below throws).
  std::unique_ptr<ShmGroup> group;
  auto adopt = [&] {
    if (!base) return;
    const Header* header = static_cast<const Header*>(base);
    if (header->magic != kMagic || header->size != (uint32_t)n || header->slot_bytes != slot_bytes) {
      munmap(base, bytes);
      return;
    }
    group.reset(new ShmGroup(comm, base, bytes, slot_bytes));
    Control* mine = group->control(rank);
    mine->pid = (int32_t)getpid();
    mine->start_time = ReadProcessState(mine->pid).start_time;
  };
  if (rank == 0) {
    adopt();
    store.set("shm/name", Bytes(name));
  } else {
    name = String(store.get("shm/name"));
    if (!name.empty()) base = OpenRegion(name, bytes);
    adopt();
  }
  store.set("shm/mapped/" + me, Bytes(group ? "1" : "0"));
  bool everyone = true;
  for (int32_t r = 0; r < n; ++r) everyone = String(store.get("shm/mapped/" + std::to_string(r))) == "1" && everyone;
  // Every member has mapped the region (or given up): its name goes, the mappings keep it alive.
  created.Remove();
  if (!everyone) group.reset();
  return group;
}

ShmGroup::ShmGroup(hvd_comm* comm, void* base, size_t bytes, size_t slot_bytes)
    : comm_(comm),
      rank_(comm->rank),
      size_(comm->size),
      base_(base),
      bytes_(bytes),
      slot_bytes_(slot_bytes),
      slots_(static_cast<uint8_t*>(base) + AlignUp(kHeaderBytes + sizeof(Control) * (size_t)comm->size, kPage)) {
  static_assert(sizeof(Control) == 64, "a control block is one cache line");
}

ShmGroup::~ShmGroup() {
  Control* mine = control(rank_);
  mine->left.store(1, std::memory_order_seq_cst);
  Futex(&mine->step, FUTEX_WAKE, INT_MAX, nullptr);  // sleepers re-check, and find this member gone
  munmap(base_, bytes_);
}

ShmGroup::Control* ShmGroup::control(int32_t member) const {
  return reinterpret_cast<Control*>(static_cast<uint8_t*>(base_) + kHeaderBytes) + member;
}

uint32_t ShmGroup::Publish() {
  Control* mine = control(rank_);
  mine->step.store(++step_, std::memory_order_seq_cst);  // release: the data written before it is visible
  if (mine->sleepers.load(std::memory_order_seq_cst) != 0) Futex(&mine->step, FUTEX_WAKE, INT_MAX, nullptr);
  return step_;
}

void ShmGroup::AwaitAll(uint32_t step) {
  for (int32_t m = 0; m < size_; ++m)
    if (m != rank_) WaitForStep(m, step);
}

void ShmGroup::Await(int32_t member, uint32_t step) { WaitForStep(member, step); }

void ShmGroup::AwaitSlotFree() { AwaitAll(slot_read_step_); }

void ShmGroup::OpenStep(const Signature& mine) {
  control(rank_)->signature = mine;  // plain stores, published by Publish()'s release
  AwaitAll(Publish());
  CheckSignatures(mine);
}

void ShmGroup::CheckSignatures(const Signature& mine) const {
  for (int32_t m = 0; m < size_; ++m) {
    const Signature& theirs = control(m)->signature;  // published with the step just awaited
    if (m == rank_ || theirs == mine) continue;
    const std::string said = DescribeSignature(theirs), says = DescribeSignature(mine);
    // Counts split differently among the members, or another element size, read alike in words.
    const std::string beyond = said == says ? " (alike in size, but not in the counts or element size)" : "";
    throw ShmFailure{HVD_ERR_INVALID_ARGUMENT,
                     "collective mismatch: " + RankName(comm_, m) + " called " + said + ", this member " + says + beyond};
  }
}

void ShmGroup::WaitForStep(int32_t member, uint32_t step) {
  Control* peer = control(member);
  if (StepReached(peer->step.load(std::memory_order_acquire), step)) return;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Capped at a year: HOROVOD_GLOO_TIMEOUT_SECONDS=1e12 must not overflow the clock.
  const auto deadline = start + std::min<std::chrono::milliseconds>(comm_->timeout, std::chrono::hours(24 * 365));
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
      std::snprintf(seconds, sizeof seconds, "%g s", (double)comm_->timeout.count() / 1000.0);
      std::string why = std::string("timed out after ") + seconds +
                        " (HOROVOD_GLOO_TIMEOUT_SECONDS): a peer did not take part in time";
      char state = ReadProcessState(peer->pid).state;
      if (state == 'T' || state == 't') why += "; its process (pid " + std::to_string(peer->pid) + ") is stopped";
      FailWaiting(member, HVD_ERR_TIMEOUT, why + " (shared-memory transport)");
    }
  }
}

std::string ShmGroup::PeerGone(int32_t member) const {
  const Control* peer = control(member);
  if (peer->left.load(std::memory_order_acquire)) {
    return "it closed its communicator (Horovod was shut down there, or its process is ending)";
  }
  ProcessState now = ReadProcessState(peer->pid);
  bool gone = now.gone || now.state == 'Z' || now.state == 'X' ||
              (peer->start_time && now.start_time && now.start_time != peer->start_time);  // pid reused
  return gone ? "its process (pid " + std::to_string(peer->pid) + ") has exited" : "";
}

void ShmGroup::FailWaiting(int32_t member, int status, const std::string& why) {
  comm_->waiting_on = {member};
  throw ShmFailure{status, why};
}

}  // namespace hvd_gloo
