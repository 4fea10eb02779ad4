// The fake's collectives: groups, the copies around each member's part, and the meeting where
// each member computes its results from every member's inputs.
#include <cstdio>
#include <cstring>

#include "fake_nccl.h"
#include "horovod/hvd_reduce.hpp"

namespace fake {
namespace {

hvd_dtype DtypeOf(int type) {
  switch (type) {
    case 0: return HVD_DTYPE_INT8;
    case 1: return HVD_DTYPE_UINT8;
    case 2: return HVD_DTYPE_INT32;
    case 4: return HVD_DTYPE_INT64;
    case 6: return HVD_DTYPE_FLOAT16;
    case 7: return HVD_DTYPE_FLOAT32;
    case 8: return HVD_DTYPE_FLOAT64;
    case 9: return HVD_DTYPE_BFLOAT16;
    default: return HVD_DTYPE_UINT8;  // uint32/uint64 are never asked for by the backend
  }
}

size_t Size(const Item& item) { return hvd::dtype_size(DtypeOf(item.type)); }

size_t InputBytes(const Item& item, int rank, int nranks) {
  switch (item.kind) {
    case Item::kBroadcast: return rank == item.root ? item.count * Size(item) : 0;
    case Item::kReduceScatter: return item.count * nranks * Size(item);
    case Item::kRecv: return 0;
    default: return item.count * Size(item);
  }
}

size_t OutputBytes(const Item& item, int rank, int nranks) {
  switch (item.kind) {
    case Item::kReduce: return rank == item.root ? item.count * Size(item) : 0;
    case Item::kAllGather: return item.count * nranks * Size(item);
    case Item::kSend: return 0;
    default: return item.count * Size(item);
  }
}

// The reduction of every member's input of collective `index`, over `count` elements.
std::vector<char> ReduceAll(const std::vector<const Item*>& items, size_t count, int nranks) {
  const Item& first = *items[0];
  const hvd_dtype dtype = DtypeOf(first.type);
  const bool pre_mul = first.op >= kFirstCustomOp;
  const hvd_reduce_op op = first.op == 1   ? HVD_REDUCE_PRODUCT
                           : first.op == 2 ? HVD_REDUCE_MAX
                           : first.op == 3 ? HVD_REDUCE_MIN
                                           : HVD_REDUCE_SUM;
  std::vector<char> acc;
  for (const Item* item : items) {
    std::vector<char> in = item->input;
    if (pre_mul) hvd::scale(dtype, in.data(), count, item->scale);
    if (acc.empty())
      acc = std::move(in);
    else
      hvd::reduce_into(dtype, op, acc.data(), in.data(), count);
  }
  if (first.op == 4) hvd::scale(dtype, acc.data(), count, 1.0 / nranks);  // ncclAvg
  return acc;
}

// Results go into the buffer sized when the call was queued: its copy to the device holds its address.
void Put(Item& item, const char* data, size_t bytes) {
  if (bytes == item.output.size())
    std::memcpy(item.output.data(), data, bytes);
  else
    Log("fake: a result of " + std::to_string(bytes) + " bytes for a buffer of " + std::to_string(item.output.size()));
}
void Put(Item& item, const std::vector<char>& data) { Put(item, data.data(), data.size()); }

std::vector<const Item*> Collectives(const std::vector<Item>& part) {
  std::vector<const Item*> found;
  for (const Item& item : part)
    if (item.kind != Item::kSend && item.kind != Item::kRecv) found.push_back(&item);
  return found;
}

// This member's results, from every member's part of the same group (all have arrived).
void Compute(std::vector<Item>& mine, const std::vector<std::shared_ptr<std::vector<Item>>>& parts, int rank) {
  const int nranks = (int)parts.size();
  std::vector<std::vector<const Item*>> collectives;
  for (const auto& part : parts) collectives.push_back(Collectives(*part));
  size_t index = 0;
  std::map<int, int> received;  // receives so far from each peer
  for (Item& item : mine) {
    if (item.kind == Item::kSend) continue;
    if (item.kind == Item::kRecv) {
      int k = received[item.root]++;
      for (const Item& sent : *parts[item.root]) {
        if (sent.kind != Item::kSend || sent.root != rank || k-- > 0) continue;
        Put(item, sent.input);
        break;
      }
      continue;
    }
    std::vector<const Item*> same;
    for (int q = 0; q < nranks; ++q) same.push_back(collectives[q].at(index));
    ++index;
    const size_t count = item.count;
    switch (item.kind) {
      case Item::kAllReduce: Put(item, ReduceAll(same, count, nranks)); break;
      case Item::kReduce:
        if (rank == item.root) Put(item, ReduceAll(same, count, nranks));
        break;
      case Item::kReduceScatter: {
        std::vector<char> all = ReduceAll(same, count * nranks, nranks);
        const size_t bytes = count * Size(item);
        Put(item, all.data() + rank * bytes, bytes);
        break;
      }
      case Item::kBroadcast: Put(item, same[item.root]->input); break;
      case Item::kAllGather: {
        std::vector<char> all;
        for (const Item* other : same) all.insert(all.end(), other->input.begin(), other->input.end());
        Put(item, all);
        break;
      }
      default: break;
    }
  }
}

struct Task {
  std::function<void()> run;
};
void RunTask(void* p) {
  auto* task = static_cast<Task*>(p);
  task->run();
  delete task;
}
int Launch(const hvd_device_v1* d, void* stream, std::function<void()> run) {
  auto* task = new Task{std::move(run)};
  int rc = d->launch_host_fn(stream, RunTask, task);
  if (rc) delete task;
  return rc;
}

}  // namespace

int Queue(const std::shared_ptr<Comm>& comm, std::vector<Item> items, void* stream) {
  const hvd_device_v1* d = Device();
  if (!d) {
    Log("fake: no device attached (fake_nccl_attach)");
    return kInternal;
  }
  auto part = std::make_shared<std::vector<Item>>(std::move(items));
  const uint64_t seq = comm->next_op++;
  const int rank = comm->rank, nranks = comm->nranks;
  for (Item& item : *part) {
    // Sized once here: the copies queued below hold pointers into these buffers.
    item.input.resize(InputBytes(item, rank, nranks));
    item.output.resize(OutputBytes(item, rank, nranks));
    if (!item.input.empty() &&
        d->memcpy_async(item.input.data(), item.send, item.input.size(), HVD_COPY_DEVICE_TO_HOST, stream)) {
      Log(std::string("fake: copying an input failed: ") + d->last_error());
      return kUnhandledCuda;
    }
  }
  int rc = Launch(d, stream, [comm, part, seq, rank, nranks] {
    Clique& c = *comm->clique;
    std::unique_lock<std::mutex> lock(c.mu);
    Clique::Slot& slot = c.slots[seq];
    if (slot.parts.empty()) slot.parts.resize(nranks);
    slot.parts[rank] = part;
    slot.arrived++;
    c.cv.notify_all();
    c.cv.wait(lock, [&] { return slot.arrived == nranks || comm->aborted; });
    if (!comm->aborted) Compute(*part, slot.parts, rank);  // an aborted member's results stay as they were
    if (++slot.departed == nranks) c.slots.erase(seq);
  });
  for (Item& item : *part) {
    if (rc == 0 && !item.output.empty())
      rc = d->memcpy_async(item.recv, item.output.data(), item.output.size(), HVD_COPY_HOST_TO_DEVICE, stream);
  }
  if (rc == 0) rc = Launch(d, stream, [part] {});  // keeps the buffers until the copies ran
  if (rc) {
    Log(std::string("fake: queuing failed: ") + d->last_error());
    return kUnhandledCuda;
  }
  return kSuccess;
}

}  // namespace fake

using fake::Item;

namespace {

thread_local int t_depth = 0;
struct Pending {
  Handle* handle;
  void* stream;
  std::vector<Item> items;
};
thread_local std::vector<Pending> t_group;
thread_local int t_group_failure = fake::kSuccess;

const char* OpName(int op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < fake::kFirstCustomOp ? names[op] : "premulsum";
}

// Queues `items` now, answering as NCCL does for the comm's mode.
int Submit(Handle* handle, std::vector<Item> items, void* stream) {
  int rc = fake::Queue(handle->comm, std::move(items), stream);
  if (rc != fake::kSuccess || handle->comm->blocking) return rc;
  std::lock_guard<std::mutex> lock(handle->comm->clique->mu);
  handle->comm->pending_polls = 2;  // the backend must poll before it may go on
  return fake::kInProgress;
}

int Add(Handle* handle, Item item, void* stream, const char* call) {
  fake::Comm& comm = *handle->comm;
  if (item.op >= fake::kFirstCustomOp) {
    std::lock_guard<std::mutex> lock(comm.clique->mu);
    auto it = comm.custom_ops.find(item.op);
    if (it == comm.custom_ops.end()) return fake::kInvalidArgument;
    item.scale = it->second;
  }
  char line[160];
  std::snprintf(line, sizeof line, "%s rank=%d count=%zu type=%d op=%s root=%d", call, comm.rank, item.count, item.type,
                OpName(item.op), item.root);
  fake::Log(line);
  if (int failure = fake::TakeFailure(comm.rank, call)) {
    if (t_depth > 0) t_group_failure = failure;
    return failure;
  }
  if (t_depth == 0) return Submit(handle, {std::move(item)}, stream);
  for (Pending& pending : t_group) {
    if (pending.handle == handle) {
      pending.items.push_back(std::move(item));
      return fake::kSuccess;
    }
  }
  t_group.push_back({handle, stream, {}});
  t_group.back().items.push_back(std::move(item));
  return fake::kSuccess;
}

Item Make(Item::Kind kind, const void* send, void* recv, size_t count, int type, int op, int root) {
  Item item{};
  item.kind = kind;
  item.send = send;
  item.recv = recv;
  item.count = count;
  item.type = type;
  item.op = op;
  item.root = root;
  return item;
}

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT int ncclGroupStart() {
  if (t_depth++ == 0) t_group_failure = fake::kSuccess;
  return fake::kSuccess;
}

FAKE_EXPORT int ncclGroupEnd() {
  if (--t_depth > 0) return fake::kSuccess;
  std::vector<Pending> group;
  group.swap(t_group);
  fake::Log("ncclGroupEnd");
  if (t_group_failure != fake::kSuccess) return t_group_failure;  // nothing of a failed group runs
  int result = fake::kSuccess;
  for (Pending& pending : group) {
    int rc = Submit(pending.handle, std::move(pending.items), pending.stream);
    if (rc != fake::kSuccess && result == fake::kSuccess) result = rc;
  }
  return result;
}

FAKE_EXPORT int ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, Handle* comm,
                              void* stream) {
  return Add(comm, Make(Item::kAllReduce, send, recv, count, type, op, 0), stream, "ncclAllReduce");
}

FAKE_EXPORT int ncclBroadcast(const void* send, void* recv, size_t count, int type, int root, Handle* comm,
                              void* stream) {
  return Add(comm, Make(Item::kBroadcast, send, recv, count, type, 0, root), stream, "ncclBroadcast");
}

FAKE_EXPORT int ncclReduce(const void* send, void* recv, size_t count, int type, int op, int root, Handle* comm,
                           void* stream) {
  return Add(comm, Make(Item::kReduce, send, recv, count, type, op, root), stream, "ncclReduce");
}

FAKE_EXPORT int ncclReduceScatter(const void* send, void* recv, size_t count, int type, int op, Handle* comm,
                                  void* stream) {
  return Add(comm, Make(Item::kReduceScatter, send, recv, count, type, op, 0), stream, "ncclReduceScatter");
}

FAKE_EXPORT int ncclAllGather(const void* send, void* recv, size_t count, int type, Handle* comm, void* stream) {
  return Add(comm, Make(Item::kAllGather, send, recv, count, type, 0, 0), stream, "ncclAllGather");
}

FAKE_EXPORT int ncclSend(const void* send, size_t count, int type, int peer, Handle* comm, void* stream) {
  return Add(comm, Make(Item::kSend, send, nullptr, count, type, 0, peer), stream, "ncclSend");
}

FAKE_EXPORT int ncclRecv(void* recv, size_t count, int type, int peer, Handle* comm, void* stream) {
  return Add(comm, Make(Item::kRecv, nullptr, recv, count, type, 0, peer), stream, "ncclRecv");
}
