// Completion state of one submitted operation, shared by the engine and the caller's handle.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "core/common.h"
#include "core/output_buffer.h"
#include "horovod/hvd_device.h"

namespace hvdcore {

// What an engine's loop learns from its callers: how many are blocked waiting for a result, and a
// wake-up as soon as one starts to. While a caller is blocked, its core is free for the engine to
// cycle quickly (engine/cycle_pacer.h), and whatever it submitted before is all there is for now,
// so the engine need not wait for more (Engine::AwaitWork). Through it, too, a caller about to
// block first offers its own thread for the cycle its work needs (Engine::HelpWithCycle). Shared
// by the engine and its handles, which may outlive it.
class CallerBell {
 public:
  int blocked() const { return blocked_.load(std::memory_order_relaxed); }
  // How many times a caller has started to block: a burst is over when this changes after its
  // first operation (a thread blocked since before, in join() say, says nothing about it).
  uint64_t rings() const { return rings_.load(std::memory_order_relaxed); }
  void CallerBlocks() {
    blocked_.fetch_add(1, std::memory_order_relaxed);
    rings_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lk(mu_);
    if (wake_) wake_();
  }
  void CallerResumes() { blocked_.fetch_sub(1, std::memory_order_relaxed); }
  // A caller that runs a cycle for its work counts as blocked meanwhile (the pace after that cycle
  // is a blocked caller's), without ringing: it is the one that would have been woken.
  void CallerHelps() { blocked_.fetch_add(1, std::memory_order_relaxed); }
  // Runs the engine's helper (see Attach): true when it ran a cycle on this thread.
  bool Help() {
    std::shared_lock<std::shared_mutex> lk(help_mu_);
    return help_ && help_();
  }
  // The engine rings its loop through `wake`, and lets waiting callers run a cycle through `help`,
  // from construction until destruction.
  void Attach(std::function<void()> wake, std::function<bool()> help) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      wake_ = std::move(wake);
    }
    std::unique_lock<std::shared_mutex> lk(help_mu_);  // waits for a cycle a caller is running
    help_ = std::move(help);
  }
  void Detach() { Attach(nullptr, nullptr); }

 private:
  std::atomic<int> blocked_{0};
  std::atomic<uint64_t> rings_{0};
  std::mutex mu_;  // orders ringing against Detach(): no wake-up reaches a destroyed engine
  std::function<void()> wake_;
  // Orders helping against Detach() likewise. Not mu_: a cycle completes operations, and their
  // callbacks may submit more, which rings.
  std::shared_mutex help_mu_;
  std::function<bool()> help_;
};

// How a device operation completes: the event recorded after its last work on the engine's
// stream, which the caller's stream waits on. Shared by the handles of one batch.
struct DeviceCompletion {
  const hvd_device_v1* device;
  int32_t device_id;
  std::shared_ptr<void> done;  // the event (device/event_pool.h), held until the last handle goes
};

class HandleState {
 public:
  // Called once, on the thread running the engine's cycle (Engine::HelpWithCycle), right after
  // completion (results and status are set): how native framework kernels
  // (binding/framework_entry.cc) learn of it without a thread waiting.
  using OnComplete = std::function<void(HandleState&)>;

  explicit HandleState(std::shared_ptr<CallerBell> bell = nullptr, OnComplete on_complete = nullptr)
      : bell_(std::move(bell)), on_complete_(std::move(on_complete)) {}
  bool poll() const { return done_.load(std::memory_order_acquire); }
  // Blocks until done or until `interrupted()`, asked every `slice`, returns true; true when done.
  // How a Python caller waits: between slices it lets Python run its signal handlers (Ctrl-C, an
  // alarm), which a wait that never returned to Python would hold off until the peer arrived.
  // Callers release the GIL first.
  bool WaitInterruptibly(std::chrono::microseconds slice, const std::function<bool()>& interrupted) {
    if (poll()) return true;
    const int64_t began_us = on_waited_ ? NowMicros() : 0;
    const bool done = Block(slice, interrupted);
    if (on_waited_) on_waited_(began_us, NowMicros());
    return done;
  }

  // Told when a caller blocked in WaitInterruptibly and when it went on (the timeline's
  // SYNCHRONIZE); set by the engine before the caller has the handle.
  using OnWaited = std::function<void(int64_t began_us, int64_t ended_us)>;
  void ObserveWaits(OnWaited on_waited) { on_waited_ = std::move(on_waited); }

  // An operation awaited by its completion callback counts as a blocked caller until it completes:
  // native framework kernels hold no thread while they wait, but their caller (a tf.function, say)
  // waits all the same, so the engine cycles as it does for a caller blocked in Wait(). Called by
  // the engine once the operation is queued (the bell wakes the loop, which must not be locked).
  void CountAsWaiting() {
    int expected = kNotCounted;
    if (bell_ && on_complete_ && waiting_.compare_exchange_strong(expected, kCounted)) bell_->CallerBlocks();
  }

  void Complete(Status status) {
    // Before the callback: it may submit more (a kernel that TensorFlow runs inline), and those
    // must see this caller counted out.
    if (on_complete_ && waiting_.exchange(kCompleted) == kCounted) bell_->CallerResumes();
    {
      std::lock_guard<std::mutex> lk(mu_);
      status_ = std::move(status);
      done_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
    if (on_complete_) on_complete_(*this);
  }
  const Status& status() const { return status_; }

  // Results, written by the engine before Complete().
  std::shared_ptr<Buffer> output;
  std::vector<int64_t> output_shape;
  hvd_dtype output_dtype = HVD_DTYPE_FLOAT32;
  std::vector<int64_t> received_splits;
  int64_t value = -1;  // join: last joined rank; add_process_set: the new id
  std::shared_ptr<DeviceCompletion> device;  // set for operations on device tensors
  hvd_stream_t caller_stream = nullptr;      // the stream the caller submitted from
  // An engine-allocated result in device memory (instead of `output`), freed when the last holder
  // (the framework's tensor) lets go.
  std::shared_ptr<void> output_device;

 private:
  bool Block(std::chrono::microseconds slice, const std::function<bool()>& interrupted) {
    // The cycle this operation waits for, run here when the engine is between cycles: it spares
    // the engine's thread a wake-up and this one another (each a context switch, tens of
    // microseconds on a virtual machine, and more while the cores are busy).
    if (bell_ && bell_->Help() && poll()) return true;
    if (bell_) bell_->CallerBlocks();
    bool done = false;
    {
      std::unique_lock<std::mutex> lk(mu_);
      while (!(done = cv_.wait_for(lk, slice, [&] { return done_.load(std::memory_order_acquire); }))) {
        lk.unlock();  // the handler may take a while (and the GIL): completion must not wait for it
        bool stop = interrupted();
        lk.lock();
        if (stop) break;
      }
    }
    if (bell_) bell_->CallerResumes();
    return done;
  }

  std::shared_ptr<CallerBell> bell_;
  OnComplete on_complete_;
  OnWaited on_waited_;
  enum { kNotCounted, kCounted, kCompleted };
  std::atomic<int> waiting_{kNotCounted};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  Status status_;
};

// One operation waiting in the engine, from enqueue to completion.
struct TensorEntry {
  std::string name;
  int32_t process_set_id = 0;
  OpType type = OpType::kAllreduce;
  TensorView input;
  TensorView output;  // preallocated by the caller (allreduce, broadcast) or empty
  ReduceOp op = ReduceOp::kSum;
  int32_t root = -1;
  double prescale = 1.0, postscale = 1.0;
  std::vector<int64_t> splits;  // alltoall: rows sent to each member
  int64_t group_id = -1;
  int32_t group_size = 0;
  std::vector<int32_t> ranks;  // add_process_set members / remove_process_set id
  std::shared_ptr<HandleState> handle;
  int64_t enqueued_us = 0;
  // Non-empty: the operation was refused when submitted (a member of a group, negotiated all the
  // same so that its partners are not left waiting for it: Engine::Refuse).
  std::string refusal;
  // Device tensors: the caller's stream, and the event recorded on it when the operation was
  // submitted (input.ready_event), destroyed with the entry.
  hvd_stream_t stream = nullptr;
  std::shared_ptr<void> ready_event;

  // Negotiation state, touched only by the background thread.
  bool sent_to_coordinator = false;
  int64_t pending_since_us = 0;
};

}  // namespace hvdcore
