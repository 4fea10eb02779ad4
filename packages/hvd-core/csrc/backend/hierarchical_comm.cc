#include "backend/hierarchical_comm.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "horovod/hvd_reduce.hpp"

namespace hvdcore {
namespace {

uint64_t Fnv1a(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

}  // namespace

Status HierarchicalComm::Connect(Comm& global, const std::string& host_key, int32_t local_rank,
                                 const Connector& connect, std::unique_ptr<HierarchicalComm>* out, std::string* why) {
  out->reset();
  const int32_t n = global.size(), me = global.rank();
  // Halved so that it stays a positive int64 (the values only need to compare equal).
  int64_t mine[2] = {(int64_t)(Fnv1a(host_key) >> 1), local_rank};
  std::vector<int64_t> all(2 * (size_t)n);
  Status st = global.Allgatherv(mine, all.data(), std::vector<size_t>(n, 2), HVD_DTYPE_INT64);
  if (!st.ok()) return st;

  // Hosts in the order of their lowest rank; each host's ranks by local rank.
  std::vector<int64_t> host_order;
  std::map<int64_t, std::map<int64_t, int32_t>> by_host;  // host -> local rank -> job rank
  for (int32_t r = 0; r < n; ++r) {
    const int64_t host = all[2 * r], local = all[2 * r + 1];
    if (!by_host.count(host)) host_order.push_back(host);
    if (!by_host[host].emplace(local, r).second) {
      return Status::InvalidArgument("hierarchical allreduce: ranks " + std::to_string(by_host[host][local]) + " and " +
                                     std::to_string(r) + " both say they are local rank " + std::to_string(local) +
                                     " of one host (HOROVOD_LOCAL_RANK, HOROVOD_HOSTNAME)");
    }
  }
  size_t largest = 0, smallest = (size_t)n;
  for (const auto& [host, members] : by_host) {
    if (members.rbegin()->first != (int64_t)members.size() - 1) {
      return Status::InvalidArgument("hierarchical allreduce: the local ranks of host of rank " +
                                     std::to_string(members.begin()->second) + " are not 0.." +
                                     std::to_string(members.size() - 1) + " (HOROVOD_LOCAL_RANK)");
    }
    largest = std::max(largest, members.size());
    smallest = std::min(smallest, members.size());
  }
  if (by_host.size() == 1 || largest == 1) {
    *why = by_host.size() == 1 ? "every rank is on one host" : "every host runs one rank";
    return Status::Ok();
  }

  auto comm = std::make_unique<HierarchicalComm>();
  comm->hosts_ = (int32_t)by_host.size();
  comm->homogeneous_ = largest == smallest;
  const int64_t my_host = all[2 * me];
  std::vector<int32_t> host_ranks, cross_ranks;
  for (const auto& [local, rank] : by_host[my_host]) host_ranks.push_back(rank);
  int32_t host_index = 0, my_cross_index = 0;
  for (size_t h = 0; h < host_order.size(); ++h) {
    const auto& members = by_host[host_order[h]];
    auto found = members.find(local_rank);
    if (found == members.end()) continue;  // a smaller host: no rank with this local rank
    if (host_order[h] == my_host) {
      host_index = (int32_t)h;
      my_cross_index = (int32_t)cross_ranks.size();
    }
    cross_ranks.push_back(found->second);
  }
  comm->host_ranks_ = host_ranks;
  comm->host_index_ = host_index;
  for (int64_t host : host_order) {
    comm->hosts_members_.emplace_back();
    for (const auto& [local, rank] : by_host[host]) comm->hosts_members_.back().push_back(rank);
  }
  st = connect(host_ranks, local_rank, "host" + std::to_string(host_index), &comm->host_);
  if (st.ok()) st = connect(cross_ranks, my_cross_index, "cross" + std::to_string(local_rank), &comm->cross_);
  if (!st.ok()) return st;
  *out = std::move(comm);
  return Status::Ok();
}

std::vector<size_t> HierarchicalComm::BlockCounts(size_t count) const {
  const size_t members = (size_t)host_->size();
  std::vector<size_t> counts(members, 0);
  if (!homogeneous_) {
    counts[0] = count;  // every element's host sum to local rank 0, which alone crosses hosts
    return counts;
  }
  for (size_t i = 0; i < members; ++i) counts[i] = count / members + (i < count % members ? 1 : 0);
  return counts;
}

// A reducescatter inside the host leaves each member its block of the host's sum (all of it to
// local rank 0 where hosts differ in size); the blocks are allreduced across hosts, and an
// allgather inside the host puts the blocks together (a broadcast from local rank 0).
Status HierarchicalComm::Allreduce(const void* send, void* recv, size_t count, hvd_dtype dtype, hvd_reduce_op op) {
  const std::vector<size_t> counts = BlockCounts(count);
  const size_t esize = hvd::dtype_size(dtype), mine = counts[(size_t)host_->rank()];
  // The block lives apart from `recv`: `send` may be `recv` itself (an in-place fused buffer),
  // which the host's reducescatter still reads while it writes the block.
  if (scratch_.size() < std::max<size_t>(mine, 1) * esize) scratch_.resize(std::max<size_t>(mine, 1) * esize);
  Status st = host_->Reducescatter(send, scratch_.data(), counts, dtype, op);
  void* reduced = homogeneous_ ? (void*)scratch_.data() : recv;
  if (st.ok() && mine) st = cross_->Allreduce(scratch_.data(), reduced, mine, dtype, op);
  if (!st.ok()) return st;
  return homogeneous_ ? host_->Allgatherv(scratch_.data(), recv, counts, dtype)
                      : host_->Broadcast(recv, count, dtype, 0);
}

Status HierarchicalComm::Allgatherv(const void* send, void* recv, const std::vector<size_t>& counts, hvd_dtype dtype) {
  const size_t esize = hvd::dtype_size(dtype);
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<size_t> host_counts, per_host;
  for (int32_t m : host_ranks_) host_counts.push_back(counts[(size_t)m]);
  for (const auto& members : hosts_members_) {
    size_t sum = 0;
    for (int32_t m : members) sum += counts[(size_t)m];
    per_host.push_back(sum);
  }
  // The host's blocks, on every member of the host (the leader sends them on).
  size_t host_total = 0;
  for (size_t c : host_counts) host_total += c;
  if (scratch_.size() < std::max<size_t>(host_total, 1) * esize)
    scratch_.resize(std::max<size_t>(host_total, 1) * esize);
  Status st = host_->Allgatherv(send, scratch_.data(), host_counts, dtype);
  if (!st.ok()) return st;
  if (host_->rank() == 0) {
    // Local ranks 0 exchange their hosts' data, in host order, then put it in member order.
    if (gathered_.size() < std::max<size_t>(total, 1) * esize) gathered_.resize(std::max<size_t>(total, 1) * esize);
    st = cross_->Allgatherv(scratch_.data(), gathered_.data(), per_host, dtype);
    if (!st.ok()) return st;
    std::vector<size_t> offset(counts.size() + 1, 0);  // of each member's block in `recv`
    for (size_t m = 0; m < counts.size(); ++m) offset[m + 1] = offset[m] + counts[m];
    const uint8_t* from = gathered_.data();
    for (const auto& members : hosts_members_) {
      for (int32_t m : members) {
        if (counts[(size_t)m]) std::memcpy((uint8_t*)recv + offset[(size_t)m] * esize, from, counts[(size_t)m] * esize);
        from += counts[(size_t)m] * esize;
      }
    }
  }
  return host_->Broadcast(recv, total, dtype, 0);
}

}  // namespace hvdcore
