#include "device/simulated_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_set>

#include "device/device.h"
#include "horovod/hvd_backend.h"

namespace hvdcore {
namespace {

thread_local std::string t_last_error;

int Fail(int code, std::string message) {
  t_last_error = std::move(message);  // DeviceStatus names the device
  return code;
}

std::string Hex(const void* p) {
  char buf[32];
  snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = getenv(name);
  return v && *v ? strtoll(v, nullptr, 10) : fallback;
}

// A vector clock: entry i is how much of stream i's work is known to have happened before.
using Clock = std::vector<uint64_t>;
void Join(Clock& into, const Clock& other) {
  if (into.size() < other.size()) into.resize(other.size(), 0);
  for (size_t i = 0; i < other.size(); ++i) into[i] = std::max(into[i], other[i]);
}
uint64_t At(const Clock& c, int stream) { return (size_t)stream < c.size() ? c[stream] : 0; }

struct Access {
  int stream = -1;  // none yet
  uint64_t tick = 0;
  std::string what;  // the work that made it, for the race's message
};

struct Allocation {
  uint8_t* base = nullptr;
  size_t bytes = 0;   // as asked
  size_t mapped = 0;  // whole pages
  int device = 0;
  int open = 0;  // pieces of work touching it now: readable and writable while > 0
  int queued = 0;  // pieces of work queued that touch it, running or not (Free waits for them)
  Access last_write;
  std::map<int, Access> reads;  // by stream, since the last write
};

// A range of device memory one piece of work touches.
struct Touch {
  const void* ptr;
  size_t bytes;
  bool write;
};

class SimStream;

// Held by the event's handle and by each piece of work that signals it or waits for it: a handle
// may be destroyed while such work is queued, as CUDA allows.
struct EventState {
  std::mutex mu;
  std::condition_variable cv;
  Clock clock;             // what its latest record knows
  uint64_t recorded = 0;   // records so far
  uint64_t completed = 0;  // the latest record that has run
};
struct SimEvent {
  int device;
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

class Device {
 public:
  static Device& Get() {
    static Device* d = new Device();  // never destroyed: stream threads may outlive static destruction
    return *d;
  }

  int count() const { return count_; }
  int64_t delay_us() const { return delay_us_; }
  std::mt19937_64& rng() {
    thread_local std::mt19937_64 r(seed_ ? seed_ + std::hash<std::thread::id>()(std::this_thread::get_id())
                                         : std::random_device{}());
    return r;
  }

  // The sticky error: once a race is found, every call fails with it.
  bool Poisoned(int* rc) {
    std::lock_guard<std::mutex> lk(mu_);
    if (races_.empty()) return false;
    *rc = Fail(HVD_ERR_INTERNAL, "an earlier race poisons the device: " + races_.front());
    return true;
  }
  void Race(std::string message) {
    std::lock_guard<std::mutex> lk(mu_);
    races_.push_back(std::move(message));
  }
  SimulatedDeviceReport Report() {
    std::lock_guard<std::mutex> lk(mu_);
    SimulatedDeviceReport r;
    r.races = races_;
    r.allocations = (int64_t)allocations_.size();
    r.streams = streams_;
    return r;
  }
  void ClearRaces() {
    std::lock_guard<std::mutex> lk(mu_);
    races_.clear();
  }

  int NewStreamId() {
    std::lock_guard<std::mutex> lk(mu_);
    ++streams_;
    return next_stream_++;
  }
  void StreamGone() {
    std::lock_guard<std::mutex> lk(mu_);
    --streams_;
  }
  SimStream* DefaultStream(int device);

  int Allocate(int device, size_t bytes, void** out) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t mapped = std::max<size_t>(page, (bytes + page - 1) / page * page);
    void* p = mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return Fail(HVD_ERR_INTERNAL, "out of memory mapping " + std::to_string(bytes) + " bytes");
    std::lock_guard<std::mutex> lk(mu_);
    Allocation& a = allocations_[(uintptr_t)p];
    a.base = (uint8_t*)p;
    a.bytes = bytes;
    a.mapped = mapped;
    a.device = device;
    *out = p;
    return HVD_OK;
  }
  // As cudaFree, which synchronizes the device: work queued on any stream that touches the
  // allocation runs first, so that it never writes into memory unmapped under it.
  int Free(void* ptr) {
    std::unique_lock<std::mutex> lk(mu_);
    auto it = allocations_.find((uintptr_t)ptr);
    if (it == allocations_.end())
      return Fail(HVD_ERR_INVALID_ARGUMENT, "device_free of " + Hex(ptr) + ", not an allocation");
    unused_cv_.wait(lk, [&] { return it->second.queued == 0; });
    munmap(it->second.base, it->second.mapped);
    allocations_.erase(it);
    return HVD_OK;
  }
  // Whether [ptr, ptr + bytes) lies inside one device allocation.
  bool IsDeviceRange(const void* ptr, size_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    return Find(ptr, bytes) != nullptr;
  }
  bool IsDeviceAddress(const void* ptr) {
    std::lock_guard<std::mutex> lk(mu_);
    return Find(ptr, 1) != nullptr;
  }

  // Checks the order of a piece of work's accesses and opens the memory it touches; Close undoes
  // the opening. `at` is the work's clock, `stream` its stream.
  void Open(const std::vector<Touch>& touches, int stream, const Clock& at, const std::string& what) {
    std::lock_guard<std::mutex> lk(mu_);
    for (const Touch& t : touches) {
      Allocation* a = Find(t.ptr, t.bytes);
      if (!a) continue;  // checked when queued, and not freed before it has run (Hold)
      CheckOrder(*a, t, stream, at, what);
      if (a->open++ == 0) mprotect(a->base, a->mapped, PROT_READ | PROT_WRITE);
    }
  }
  void Close(const std::vector<Touch>& touches) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (const Touch& t : touches) {
        Allocation* a = Find(t.ptr, t.bytes);
        if (!a) continue;
        if (--a->open == 0) mprotect(a->base, a->mapped, PROT_NONE);
        --a->queued;
      }
    }
    unused_cv_.notify_all();
  }
  // Counts queued work against the allocations it will touch (Open and Close follow when it runs).
  void Hold(const std::vector<Touch>& touches) {
    std::lock_guard<std::mutex> lk(mu_);
    for (const Touch& t : touches)
      if (Allocation* a = Find(t.ptr, t.bytes)) ++a->queued;
  }

 private:
  Device()
      : count_((int)EnvInt("HOROVOD_SIMULATED_DEVICE_COUNT", 8)),
        delay_us_(EnvInt("HOROVOD_SIMULATED_DEVICE_DELAY_US", 0)),
        seed_((uint64_t)EnvInt("HOROVOD_SIMULATED_DEVICE_SEED", 0)) {}

  Allocation* Find(const void* ptr, size_t bytes) {
    auto it = allocations_.upper_bound((uintptr_t)ptr);
    if (it == allocations_.begin()) return nullptr;
    Allocation& a = std::prev(it)->second;
    const uintptr_t p = (uintptr_t)ptr, base = (uintptr_t)a.base;
    return p >= base && p + bytes <= base + a.bytes ? &a : nullptr;
  }

  void CheckOrder(Allocation& a, const Touch& t, int stream, const Clock& at, const std::string& what) {
    auto unordered = [&](const Access& prior) {
      return prior.stream >= 0 && prior.stream != stream && At(at, prior.stream) < prior.tick;
    };
    const std::string where = "device memory " + Hex(a.base) + " (" + std::to_string(a.bytes) + " bytes)";
    if (unordered(a.last_write)) {
      races_.push_back(what + " on stream " + std::to_string(stream) + " " + (t.write ? "writes" : "reads") + " " +
                       where + " written by " + a.last_write.what + " on stream " +
                       std::to_string(a.last_write.stream) + ", with no event wait between them");
    }
    if (t.write) {
      for (const auto& [s, read] : a.reads) {
        if (unordered(read)) {
          races_.push_back(what + " on stream " + std::to_string(stream) + " writes " + where + " read by " +
                           read.what + " on stream " + std::to_string(s) + ", with no event wait between them");
        }
      }
      a.reads.clear();
      a.last_write = {stream, At(at, stream), what};
    } else {
      a.reads[stream] = {stream, At(at, stream), what};
    }
  }

  const int count_;
  const int64_t delay_us_;
  const uint64_t seed_;
  std::mutex mu_;
  std::condition_variable unused_cv_;  // an allocation's queued work ran (Free waits for it)
  std::map<uintptr_t, Allocation> allocations_;
  std::vector<std::string> races_;
  int next_stream_ = 0;
  int64_t streams_ = 0;
  std::map<int, SimStream*> default_streams_;
};

class SimStream {
 public:
  explicit SimStream(int device) : device_(device), id_(Device::Get().NewStreamId()) {
    worker_ = std::thread([this] { Loop(); });
  }
  ~SimStream() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
    Device::Get().StreamGone();
  }
  int id() const { return id_; }
  int device() const { return device_; }

  // Queues `run`, which gets the work's clock. Returns the work's clock too.
  Clock Enqueue(std::function<void(const Clock&)> run) {
    std::lock_guard<std::mutex> lk(mu_);
    if (clock_.size() <= (size_t)id_) clock_.resize(id_ + 1, 0);
    ++clock_[id_];
    queue_.push_back({std::move(run), clock_});
    ++queued_;
    cv_.notify_all();
    return clock_;
  }
  Clock Snapshot() {
    std::lock_guard<std::mutex> lk(mu_);
    return clock_;
  }
  void Learn(const Clock& known) {
    std::lock_guard<std::mutex> lk(mu_);
    Join(clock_, known);
  }
  void Synchronize() {
    std::unique_lock<std::mutex> lk(mu_);
    const uint64_t target = queued_;
    done_cv_.wait(lk, [&] { return done_ >= target; });
  }

 private:
  struct Work {
    std::function<void(const Clock&)> run;
    Clock at;
  };
  void Loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and drained
      Work w = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      if (int64_t max = Device::Get().delay_us(); max > 0) {
        std::uniform_int_distribution<int64_t> pick(0, max);
        std::this_thread::sleep_for(std::chrono::microseconds(pick(Device::Get().rng())));
      }
      w.run(w.at);
      lk.lock();
      ++done_;
      done_cv_.notify_all();
    }
  }

  const int device_;
  const int id_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<Work> queue_;
  Clock clock_;
  uint64_t queued_ = 0, done_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

SimStream* Device::DefaultStream(int device) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (SimStream* s = default_streams_[device]) return s;
  }
  // Made and unmade outside mu_, which the stream's constructor and destructor take.
  auto* made = new SimStream(device);
  SimStream* winner;
  {
    std::lock_guard<std::mutex> lk(mu_);
    SimStream*& s = default_streams_[device];
    if (!s) s = made;
    winner = s;
  }
  if (winner != made) delete made;  // another thread made it meanwhile
  return winner;
}

thread_local int t_current_device = 0;

SimStream* StreamOf(hvd_stream_t stream) {
  return stream ? static_cast<SimStream*>(stream) : Device::Get().DefaultStream(t_current_device);
}

// Runs `body` on `stream` with the memory of `touches` opened and the order of its accesses checked.
void QueueAccess(SimStream* s, std::vector<Touch> touches, std::string what, std::function<void()> body) {
  const int id = s->id();
  Device::Get().Hold(touches);
  s->Enqueue([touches = std::move(touches), what = std::move(what), body = std::move(body), id](const Clock& at) {
    Device& d = Device::Get();
    d.Open(touches, id, at, what);
    body();
    d.Close(touches);
  });
}

#define HVD_SIM_CHECK_POISON()                    \
  do {                                            \
    int rc_;                                      \
    if (Device::Get().Poisoned(&rc_)) return rc_; \
  } while (0)

const char* LastError() { return t_last_error.c_str(); }

int DeviceCount(int32_t* count) {
  *count = Device::Get().count();
  return HVD_OK;
}

int SetDevice(int32_t device) {
  if (device < 0 || device >= Device::Get().count())
    return Fail(HVD_ERR_INVALID_ARGUMENT,
                "no device " + std::to_string(device) + " (there are " + std::to_string(Device::Get().count()) + ")");
  t_current_device = device;
  return HVD_OK;
}

int StreamCreate(int32_t device, hvd_stream_t* out) {
  HVD_SIM_CHECK_POISON();
  if (device < 0 || device >= Device::Get().count())
    return Fail(HVD_ERR_INVALID_ARGUMENT, "no device " + std::to_string(device));
  *out = new SimStream(device);
  return HVD_OK;
}

int StreamDestroy(hvd_stream_t stream) {
  if (!stream) return Fail(HVD_ERR_INVALID_ARGUMENT, "the default stream cannot be destroyed");
  delete static_cast<SimStream*>(stream);  // runs what is queued first
  return HVD_OK;
}

int StreamSynchronize(hvd_stream_t stream) {
  StreamOf(stream)->Synchronize();
  HVD_SIM_CHECK_POISON();
  return HVD_OK;
}

int EventCreate(int32_t device, hvd_event_t* out) {
  auto* e = new SimEvent();
  e->device = device;
  *out = e;
  return HVD_OK;
}

int EventDestroy(hvd_event_t event) {
  delete static_cast<SimEvent*>(event);
  return HVD_OK;
}

int EventRecord(hvd_event_t event, hvd_stream_t stream) {
  HVD_SIM_CHECK_POISON();
  std::shared_ptr<EventState> e = static_cast<SimEvent*>(event)->state;
  SimStream* s = StreamOf(stream);
  uint64_t target;
  {
    std::lock_guard<std::mutex> lk(e->mu);
    target = ++e->recorded;
    e->clock = s->Snapshot();  // all that the stream has queued so far
  }
  s->Enqueue([e, target](const Clock&) {
    {
      std::lock_guard<std::mutex> lk(e->mu);
      e->completed = std::max(e->completed, target);
    }
    e->cv.notify_all();
  });
  return HVD_OK;
}

int StreamWaitEvent(hvd_stream_t stream, hvd_event_t event) {
  HVD_SIM_CHECK_POISON();
  std::shared_ptr<EventState> e = static_cast<SimEvent*>(event)->state;
  uint64_t target;
  Clock known;
  {
    std::lock_guard<std::mutex> lk(e->mu);
    target = e->recorded;  // the latest record at the time of the call, as CUDA's
    known = e->clock;
  }
  if (target == 0) return HVD_OK;
  SimStream* s = StreamOf(stream);
  s->Learn(known);
  s->Enqueue([e, target](const Clock&) {
    std::unique_lock<std::mutex> lk(e->mu);
    e->cv.wait(lk, [&] { return e->completed >= target; });
  });
  return HVD_OK;
}

int EventQuery(hvd_event_t event, int* done) {
  HVD_SIM_CHECK_POISON();
  EventState* e = static_cast<SimEvent*>(event)->state.get();
  std::lock_guard<std::mutex> lk(e->mu);
  *done = e->completed >= e->recorded ? 1 : 0;
  return HVD_OK;
}

int EventSynchronize(hvd_event_t event) {
  EventState* e = static_cast<SimEvent*>(event)->state.get();
  {
    std::unique_lock<std::mutex> lk(e->mu);
    const uint64_t target = e->recorded;
    e->cv.wait(lk, [&] { return e->completed >= target; });
  }
  HVD_SIM_CHECK_POISON();
  return HVD_OK;
}

const char* KindName(hvd_copy_kind kind) {
  switch (kind) {
    case HVD_COPY_HOST_TO_DEVICE: return "host-to-device copy";
    case HVD_COPY_DEVICE_TO_HOST: return "device-to-host copy";
    case HVD_COPY_DEVICE_TO_DEVICE: return "device-to-device copy";
  }
  return "copy";
}

int MemcpyAsync(void* dst, const void* src, size_t bytes, hvd_copy_kind kind, hvd_stream_t stream) {
  HVD_SIM_CHECK_POISON();
  if (bytes == 0) return HVD_OK;
  Device& d = Device::Get();
  const bool src_device = kind != HVD_COPY_HOST_TO_DEVICE, dst_device = kind != HVD_COPY_DEVICE_TO_HOST;
  if (kind < HVD_COPY_HOST_TO_DEVICE || kind > HVD_COPY_DEVICE_TO_DEVICE)
    return Fail(HVD_ERR_INVALID_ARGUMENT, "unknown copy kind " + std::to_string((int)kind));
  // A pointer on the wrong side is the bug this device exists to find: refuse it, naming it.
  if (src_device != d.IsDeviceRange(src, bytes) || (!src_device && d.IsDeviceAddress(src)))
    return Fail(HVD_ERR_INVALID_ARGUMENT, std::string(KindName(kind)) + " of " + std::to_string(bytes) +
                                              " bytes: source " + Hex(src) + " is not " +
                                              (src_device ? "inside one device allocation" : "host memory"));
  if (dst_device != d.IsDeviceRange(dst, bytes) || (!dst_device && d.IsDeviceAddress(dst)))
    return Fail(HVD_ERR_INVALID_ARGUMENT, std::string(KindName(kind)) + " of " + std::to_string(bytes) +
                                              " bytes: destination " + Hex(dst) + " is not " +
                                              (dst_device ? "inside one device allocation" : "host memory"));
  std::vector<Touch> touches;
  if (src_device) touches.push_back({src, bytes, false});
  if (dst_device) touches.push_back({dst, bytes, true});
  QueueAccess(StreamOf(stream), std::move(touches), KindName(kind),
              [dst, src, bytes] { std::memmove(dst, src, bytes); });
  return HVD_OK;
}

int MemsetAsync(void* dst, int value, size_t bytes, hvd_stream_t stream) {
  HVD_SIM_CHECK_POISON();
  if (bytes == 0) return HVD_OK;
  if (!Device::Get().IsDeviceRange(dst, bytes))
    return Fail(HVD_ERR_INVALID_ARGUMENT,
                "memset of " + std::to_string(bytes) + " bytes at " + Hex(dst) + ": not inside one device allocation");
  QueueAccess(StreamOf(stream), {{dst, bytes, true}}, "memset",
              [dst, value, bytes] { std::memset(dst, value, bytes); });
  return HVD_OK;
}

int LaunchHostFn(hvd_stream_t stream, hvd_host_fn fn, void* user_data) {
  HVD_SIM_CHECK_POISON();
  StreamOf(stream)->Enqueue([fn, user_data](const Clock&) { fn(user_data); });
  return HVD_OK;
}

int DeviceAlloc(int32_t device, size_t bytes, void** out) {
  HVD_SIM_CHECK_POISON();
  return Device::Get().Allocate(device, bytes, out);
}

int DeviceFree(void* ptr) {
  if (!ptr) return HVD_OK;
  return Device::Get().Free(ptr);
}

std::mutex g_host_mu;
std::unordered_set<void*> g_host_allocations;

int HostAlloc(size_t bytes, void** out) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, std::max<size_t>(bytes, 1)) != 0)
    return Fail(HVD_ERR_INTERNAL, "out of memory allocating " + std::to_string(bytes) + " pinned bytes");
  std::lock_guard<std::mutex> lk(g_host_mu);
  g_host_allocations.insert(p);
  *out = p;
  return HVD_OK;
}

int HostFree(void* ptr) {
  if (!ptr) return HVD_OK;
  std::lock_guard<std::mutex> lk(g_host_mu);
  if (!g_host_allocations.erase(ptr))
    return Fail(HVD_ERR_INVALID_ARGUMENT, "host_free of " + Hex(ptr) + ", not pinned memory");
  free(ptr);
  return HVD_OK;
}

const hvd_device_v1 kSimulated = {
    HVD_DEVICE_ABI_VERSION,
    sizeof(hvd_device_v1),
    "simulated",
    HVD_DEVICE_CUDA,
    0,
    LastError,
    DeviceCount,
    SetDevice,
    StreamCreate,
    StreamDestroy,
    StreamSynchronize,
    StreamWaitEvent,
    EventCreate,
    EventDestroy,
    EventRecord,
    EventQuery,
    EventSynchronize,
    MemcpyAsync,
    MemsetAsync,
    LaunchHostFn,
    DeviceAlloc,
    DeviceFree,
    HostAlloc,
    HostFree,
};

}  // namespace

const hvd_device_v1* SimulatedDevice() { return &kSimulated; }

SimulatedDeviceReport SimulatedDeviceState() { return Device::Get().Report(); }

void SimulatedDeviceClearRaces() { Device::Get().ClearRaces(); }

}  // namespace hvdcore
