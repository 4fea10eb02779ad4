// Hierarchical allreduce (HOROVOD_HIERARCHICAL_ALLREDUCE): the job's ranks grouped by host, and an
// allreduce done in three steps, so that only one share of the data per rank crosses the network.
//
// Ranks on one host reach each other through shared memory (a host's communicator is all on one
// machine, so a backend that has such a transport uses it); between hosts, through the network.
// A flat allreduce puts every rank's traffic on the network; this one reduces inside each host
// first, crosses hosts with a fraction of it, and spreads the result inside each host:
//
// - every host has as many ranks (homogeneous): a reducescatter inside the host leaves each local
//   rank one block of the host's sum; ranks with the same local rank (one per host) allreduce their
//   block across hosts; an allgather inside the host puts the blocks together. Each rank sends 1/L
//   of the data across (L ranks per host), and every rank takes part.
// - otherwise: the host's sum goes to its local rank 0 (a reducescatter with every element on
//   member 0), the local ranks 0 allreduce it across hosts, and each broadcasts it inside its host.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend_loader.h"

namespace hvdcore {

class HierarchicalComm {
 public:
  // Creates a communicator of `ranks` (job ranks, in member order) in which this rank is member
  // `my_index`, with store keys under `key`: collective among those ranks.
  using Connector = std::function<Status(const std::vector<int32_t>& ranks, int32_t my_index, const std::string& key,
                                         std::unique_ptr<Comm>* out)>;

  // Collective over `global`: every rank says which host it is on (`host_key`, equal on one host)
  // and its local rank; the host and cross communicators are then connected. Leaves *out null,
  // with the reason in *why, where a hierarchy would not help (one host, or one rank per host).
  // Fails when the ranks' accounts of the hosts disagree (local ranks repeated or missing).
  static Status Connect(Comm& global, const std::string& host_key, int32_t local_rank, const Connector& connect,
                        std::unique_ptr<HierarchicalComm>* out, std::string* why);

  Status Allreduce(const void* send, void* recv, size_t count, hvd_dtype dtype, hvd_reduce_op op);
  // HOROVOD_HIERARCHICAL_ALLGATHER: `counts[m]` elements from member m of the global set, into
  // `recv` in member order. The host's blocks gather inside the host, local ranks 0 exchange their
  // hosts' across hosts, and each broadcasts the whole inside its host: one message per host
  // crosses the network instead of one per rank.
  Status Allgatherv(const void* send, void* recv, const std::vector<size_t>& counts, hvd_dtype dtype);

  // Which collectives go host by hosts (HOROVOD_HIERARCHICAL_ALLREDUCE, _ALLGATHER).
  bool allreduce = false;
  bool allgather = false;

  int32_t hosts() const { return hosts_; }
  bool homogeneous() const { return homogeneous_; }

  // For the same steps on the device backend (execution/device_hierarchical.cc): the ranks of this
  // host in local-rank order, this host's place among the hosts, this rank's place on its host,
  // and the communicator across hosts.
  const std::vector<int32_t>& host_ranks() const { return host_ranks_; }
  int32_t host_index() const { return host_index_; }
  int32_t local_index() const { return host_->rank(); }
  Comm& cross() { return *cross_; }
  // The elements of a `count`-element allreduce each member of the host reduces across hosts: an
  // even share each where every host has as many ranks, else all of them to local rank 0.
  std::vector<size_t> BlockCounts(size_t count) const;

 private:
  std::unique_ptr<Comm> host_;   // the ranks of this host, member i = local rank i
  std::unique_ptr<Comm> cross_;  // the ranks with this rank's local rank, one per host, in host order
  std::vector<int32_t> host_ranks_;
  std::vector<std::vector<int32_t>> hosts_members_;  // every host's members, hosts and members in order
  int32_t host_index_ = 0;
  int32_t hosts_ = 0;
  bool homogeneous_ = false;
  std::vector<uint8_t> scratch_;  // this rank's block, or the leader's host sum
  std::vector<uint8_t> gathered_;  // an allgather's data in host order, on local rank 0
};

}  // namespace hvdcore
