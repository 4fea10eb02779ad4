// Large allreduces over TCP: a reducescatter and an allgather of direct transfers (links.h), cut
// into segments and pipelined, so that this member folds one segment while the next travels and
// sends each folded segment on as soon as it is folded.
//
// Member p folds block p of the buffer (the ring's share: each member sends 2(n-1)/n of the
// buffer). Every block is cut into the same number of segments; segment k of a block travels twice:
// to its folding member (RS(k), "reducescatter"), and from it, folded, to every other member
// (AG(k), "allgather"). On every connection, both ways, the messages go in one order:
//
//     RS(0), RS(1), AG(0), RS(2), AG(1), ..., RS(S-1), AG(S-2), AG(S-1)
//
// so one segment to fold is always on its way while the one before it is folded. Gloo's ring
// pipelines too, but its 2(n-1) steps each wait for the peer's "ready" notice, and its event-loop
// thread reads the data and then wakes the waiting thread; the two-round scatter-gather that this
// replaced folded a block only once all of it was there, and sent nothing meanwhile (both measured
// against this: benchmarks/results/run-30-pipelined-allreduce.md).
//
// Every member folds its segments in rank order (rank 0's data first), as the other algorithms do,
// so every member ends with the same bits. In place, the fold of a member other than rank 0 runs in
// space of its own (rank 0's data, which the fold starts from, would land on its own) and is copied
// back: 1/n of the buffer, a segment at a time, while it is in cache.
#include <algorithm>
#include <cstring>
#include <vector>

#include "horovod/hvd_reduce.hpp"
#include "tcp/tcp_transport.h"

namespace hvd_gloo {
namespace {

// The size of a segment, at most. Smaller segments start the pipeline sooner, larger ones cost
// fewer messages and wake-ups; between hosts 256 KiB and 512 KiB did equally well, larger ones
// fell behind (benchmarks/results/run-30-pipelined-allreduce.md).
constexpr size_t kSegmentBytes = 512u << 10;

// One message on a connection, in the order above.
struct Step {
  bool folded;  // AG(segment) if true, else RS(segment)
  size_t segment;
};

std::vector<Step> MessageOrder(size_t segments) {
  std::vector<Step> order{{false, 0}};
  for (size_t k = 1; k < segments; ++k) {
    order.push_back({false, k});
    order.push_back({true, k - 1});
  }
  order.push_back({true, segments - 1});
  return order;
}

// Where the pieces are: block p (counts[p] elements) is member p's to fold, cut into `segments`
// segments of near-equal size (the first ones one element longer).
class Layout {
 public:
  Layout(size_t count, int32_t members, size_t element_size)
      : counts_(members), firsts_(members), element_(element_size) {
    for (int32_t p = 0; p < members; ++p) {
      counts_[p] = count / members + ((size_t)p < count % members ? 1 : 0);
      if (p) firsts_[p] = firsts_[p - 1] + counts_[p - 1];
    }
    segments_ = std::max<size_t>(1, (counts_[0] * element_ + kSegmentBytes - 1) / kSegmentBytes);
  }
  size_t segments() const { return segments_; }
  size_t count(int32_t p, size_t k) const { return counts_[p] / segments_ + (k < counts_[p] % segments_ ? 1 : 0); }
  size_t bytes(int32_t p, size_t k) const { return count(p, k) * element_; }
  // In bytes, from the buffer's start.
  size_t offset(int32_t p, size_t k) const {
    return (firsts_[p] + k * (counts_[p] / segments_) + std::min(k, counts_[p] % segments_)) * element_;
  }
  size_t largest_bytes(int32_t p) const { return (counts_[p] / segments_ + 1) * element_; }

 private:
  std::vector<size_t> counts_, firsts_;
  size_t element_, segments_ = 1;
};

class Pipeline {
 public:
  Pipeline(hvd_comm* comm, Links& links, int32_t channel, std::vector<uint8_t>& scratch, const void* sendbuf,
           void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op)
      : comm_(comm),
        links_(links),
        channel_(channel),
        n_(comm->size),
        rank_(comm->rank),
        dtype_(dtype),
        op_(op),
        send_(static_cast<const uint8_t*>(sendbuf)),
        out_(static_cast<uint8_t*>(recvbuf)),
        layout_(count, comm->size, hvd::dtype_size(dtype)),
        order_(MessageOrder(layout_.segments())),
        peers_(comm->size),
        // In place, a member other than rank 0 folds in space of its own: its own data, which the
        // fold reads after rank 0's, is where the result goes.
        fold_in_output_(sendbuf != recvbuf || comm->rank == 0) {
    slot_bytes_ = layout_.largest_bytes(rank_);
    if (scratch.size() < 2 * (size_t)n_ * slot_bytes_) scratch.resize(2 * (size_t)n_ * slot_bytes_);
    slots_ = scratch.data();
  }

  void Run() {
    const auto deadline = links_.Deadline();
    for (;;) {
      while (Advance()) {
      }
      const char* op = "receive";
      const int32_t waited = Waited(&op);
      if (waited < 0) break;
      comm_->waiting_on = {waited};
      links_.WaitUntil(channel_, waited, op, deadline, [this] { return Advance(); });
    }
    comm_->waiting_on.clear();
  }

 private:
  struct Peer {
    size_t sent = 0, received = 0;  // messages done, in `order_`
    bool sending = false, receiving = false;
  };

  // Member p's RS(k) lands in slot (k % 2, p): RS(k + 1) can arrive while RS(k) is folded.
  uint8_t* slot(size_t k, int32_t p) const { return slots_ + ((k % 2) * (size_t)n_ + (size_t)p) * slot_bytes_; }
  uint8_t* accumulator(size_t k) const { return fold_in_output_ ? out_ + layout_.offset(rank_, k) : slot(k, 0); }
  // Rank 0's data lands where the fold starts from.
  uint8_t* rs_destination(int32_t p, size_t k) const { return p == 0 ? accumulator(k) : slot(k, p); }
  // RS(k) from p is here: message 0 for k == 0, else message 2k - 1.
  bool Arrived(int32_t p, size_t k) const { return p == rank_ || peers_[p].received > (k == 0 ? 0 : 2 * k - 1); }

  // Moves every transfer and the fold as far as they go without waiting; whether anything moved.
  // Runs after each round of reads and writes of a wait.
  bool Advance() {
    bool progressed = false;
    for (int32_t p = 0; p < n_; ++p) {
      if (p == rank_) continue;
      progressed |= AdvanceReceives(p);
      progressed |= AdvanceSends(p);
    }
    return AdvanceFold() || progressed;
  }

  // Receives from p, one posted at a time, in `order_`.
  bool AdvanceReceives(int32_t p) {
    Peer& peer = peers_[p];
    bool progressed = false;
    for (;;) {
      if (peer.receiving) {
        if (!links_.Received(channel_, p)) break;
        peer.receiving = false;
        ++peer.received;
        progressed = true;
      }
      if (peer.received == order_.size()) break;
      const Step m = order_[peer.received];
      // RS(k) reuses the slot of RS(k - 2): not before that one is folded.
      if (!m.folded && m.segment >= 2 && folded_ + 1 < m.segment) break;
      const size_t bytes = layout_.bytes(m.folded ? p : rank_, m.segment);
      if (bytes == 0) {  // both sides know it: nothing travels
        ++peer.received;
        progressed = true;
        continue;
      }
      void* into = m.folded ? out_ + layout_.offset(p, m.segment) : rs_destination(p, m.segment);
      links_.PostReceive(channel_, p, into, bytes);
      peer.receiving = true;
    }
    return progressed;
  }

  // Sends to p, one at a time, in `order_`; AG(k) once segment k is folded.
  bool AdvanceSends(int32_t p) {
    Peer& peer = peers_[p];
    bool progressed = false;
    for (;;) {
      if (peer.sending) {
        if (!links_.Sent(channel_, p)) break;
        peer.sending = false;
        ++peer.sent;
        progressed = true;
      }
      if (peer.sent == order_.size()) break;
      const Step m = order_[peer.sent];
      if (m.folded && m.segment >= folded_) break;
      const int32_t block = m.folded ? rank_ : p;
      const size_t bytes = layout_.bytes(block, m.segment);
      if (bytes == 0) {
        ++peer.sent;
        progressed = true;
        continue;
      }
      const uint8_t* from = (m.folded ? out_ : send_) + layout_.offset(block, m.segment);
      links_.Send(channel_, p, from, bytes);
      peer.sending = true;
    }
    return progressed;
  }

  // Folds the members' data of the current segment in rank order, as far as it has arrived.
  bool AdvanceFold() {
    bool progressed = false;
    while (folded_ < layout_.segments() && Arrived(folding_, folded_)) {
      const size_t k = folded_;
      uint8_t* acc = accumulator(k);
      uint8_t* result = out_ + layout_.offset(rank_, k);
      const uint8_t* own = send_ + layout_.offset(rank_, k);
      if (folding_ == 0) {
        if (rank_ == 0 && acc != own) std::memcpy(acc, own, layout_.bytes(rank_, k));  // else it arrived there
      } else {
        hvd::reduce_into(dtype_, op_, acc, folding_ == rank_ ? own : slot(k, folding_), layout_.count(rank_, k));
      }
      progressed = true;
      if (++folding_ < n_) continue;
      if (acc != result) std::memcpy(result, acc, layout_.bytes(rank_, k));
      ++folded_;
      folding_ = 0;
    }
    return progressed;
  }

  // The peer to wait on (and whether for a receive or a send): the member the fold waits for, else
  // any whose transfers are not done; -1 when all is done.
  int32_t Waited(const char** op) const {
    if (folded_ < layout_.segments()) return folding_;
    for (int32_t p = 0; p < n_; ++p) {
      if (p == rank_) continue;
      if (peers_[p].received < order_.size()) return p;
      if (peers_[p].sent < order_.size()) {
        *op = "send";
        return p;
      }
    }
    return -1;
  }

  hvd_comm* comm_;
  Links& links_;
  const int32_t channel_, n_, rank_;
  const hvd_dtype dtype_;
  const hvd_reduce_op op_;
  const uint8_t* send_;
  uint8_t* out_;
  const Layout layout_;
  const std::vector<Step> order_;
  std::vector<Peer> peers_;
  const bool fold_in_output_;
  uint8_t* slots_ = nullptr;
  size_t slot_bytes_ = 0;
  // The fold: segments done, and in the current one, the members folded in so far.
  size_t folded_ = 0;
  int32_t folding_ = 0;
};

}  // namespace

void TcpTransport::AllreducePipelined(const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype,
                                      hvd_reduce_op op) {
  Pipeline(comm_, direct_, kDirect, scratch_, sendbuf, recvbuf, count, dtype, op).Run();
}

}  // namespace hvd_gloo
