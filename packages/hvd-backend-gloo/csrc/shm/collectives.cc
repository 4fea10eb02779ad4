// Every collective through the shared-memory region (group.h).
//
// Each collective moves through the members' slots in pieces of at most one slot. A member
// copies its piece in, publishes a step, waits for its peers' step, reads what it needs, and
// publishes that it has read; it waits for that last step of its peers only before it next
// overwrites its slot, so the wait is usually already over by then. The first step of every
// collective also carries its signature, which each member checks against its peers' before it
// reads anything (signature.h).
#include "shm/collectives.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "common/elements.h"

namespace hvd_shm {
namespace {

using hvd_common::BufferList;
using hvd_common::Sum;

// Up to this many bytes per piece, every member folds all slots itself, in rank order: one
// synchronisation. Above, each member reduces one part of the piece and the others copy it from its
// slot (a reduce-scatter then an allgather, both in shared memory): two synchronisations, but each
// member reads each byte of the piece once instead of once per member, and copies into its slot
// only the parts its peers reduce.
constexpr size_t kFoldWholeBytes = 64 * 1024;

// Elements [first, last) of part `member` when `count` elements are split into n parts.
std::pair<size_t, size_t> Part(size_t count, int32_t n, int32_t member) {
  size_t base = count / n, extra = count % n;
  size_t first = (size_t)member * base + std::min<size_t>(member, extra);
  return {first, first + base + ((size_t)member < extra ? 1 : 0)};
}

// The own part of a piece is reduced, scaled and published in blocks of this many bytes, so that
// each block is still in cache when it is scaled and copied to the slot.
constexpr size_t kBlockBytes = 64 * 1024;

// out = slot(0) op slot(1) op ... op slot(n-1), over `count` elements at `offset` bytes into each
// slot. Every member folds in rank order, so all results are bitwise equal.
void FoldSlots(const Group& g, size_t offset, void* out, size_t count, hvd_dtype dtype, hvd_reduce_op op) {
  std::memcpy(out, g.slot(0) + offset, count * hvd::dtype_size(dtype));
  for (int32_t m = 1; m < g.size(); ++m) hvd::reduce_into(dtype, op, out, g.slot(m) + offset, count);
}

void Scale(hvd_dtype dtype, void* buf, size_t count, double factor) {
  if (factor != 1.0) hvd::scale(dtype, buf, count, factor);
}

size_t PieceOf(size_t total, size_t done, size_t limit) { return done < total ? std::min(limit, total - done) : 0; }

// Once a piece is in the slots: the step of the collective's first piece (`done` == 0) opens it,
// its signature checked; later pieces' steps are only published and awaited.
void AwaitPiece(Group& g, const Signature& collective, size_t done) {
  if (done == 0) {
    g.OpenStep(collective);
  } else {
    g.AwaitAll(g.Publish());
  }
}

// Where each member's block starts, in bytes, in a buffer of the members' blocks in rank order.
std::vector<size_t> BlockOffsets(const size_t* counts, int32_t n, size_t element_size) {
  std::vector<size_t> offset(n, 0);
  for (int32_t m = 1; m < n; ++m) offset[m] = offset[m - 1] + counts[m - 1] * element_size;
  return offset;
}

}  // namespace

void Allreduce(Group& g, const BufferList& buffers, hvd_dtype dtype, hvd_reduce_op op, double postscale) {
  const size_t element = buffers.element_size(), count = buffers.count();
  const int32_t n = g.size(), rank = g.rank();
  const size_t per_piece = g.slot_bytes() / element;
  const Signature signature{Collective::kAllreduce, -1, (int32_t)dtype, (int32_t)op, count * element,
                            ScaleBits(postscale)};
  for (size_t done = 0; done < count;) {
    const size_t c = std::min(per_piece, count - done);
    g.AwaitSlotFree();
    if (c * element <= kFoldWholeBytes || c < (size_t)n) {
      // Every member folds all slots in rank order, so all results are bitwise equal.
      buffers.Gather(done, done + c, g.slot(rank));  // before any result is written: in place is allowed
      AwaitPiece(g, signature, done);
      buffers.ForEachRun(done, done + c, [&](const uint8_t*, uint8_t* recv, size_t at, size_t run) {
        FoldSlots(g, (at - done) * element, recv, run, dtype, op);
        Scale(dtype, recv, run, postscale);
      });
    } else {
      auto [first, last] = Part(c, n, rank);
      // Peers read only their own parts of this member's slot: the rest of the piece goes there.
      buffers.Gather(done, done + first, g.slot(rank));
      buffers.Gather(done + last, done + c, g.slot(rank) + last * element);
      AwaitPiece(g, signature, done);
      // This member alone reduces its part, and every member copies the result: any fixed order
      // gives all of them the same bits. Its own contribution comes first, so that the fold starts
      // in place; the result then replaces its part of the slot, which no peer reads.
      const size_t block = std::max<size_t>(1, kBlockBytes / element);
      buffers.ForEachRun(done + first, done + last, [&](const uint8_t* send, uint8_t* recv, size_t at, size_t run) {
        for (size_t b = 0; b < run; b += block) {
          const size_t k = std::min(block, run - b);
          uint8_t* out = recv + b * element;
          uint8_t* published = g.slot(rank) + (at + b - done) * element;
          if (out != send + b * element) std::memcpy(out, send + b * element, k * element);
          for (int32_t m = 0; m < n; ++m) {
            if (m != rank) hvd::reduce_into(dtype, op, out, g.slot(m) + (at + b - done) * element, k);
          }
          Scale(dtype, out, k, postscale);
          std::memcpy(published, out, k * element);
        }
      });
      g.AwaitAll(g.Publish());
      for (int32_t m = 0; m < n; ++m) {
        if (m == rank) continue;
        auto [from, to] = Part(c, n, m);
        buffers.Scatter(g.slot(m) + from * element, done + from, done + to);
      }
    }
    g.MarkSlotRead(g.Publish());
    done += c;
  }
}

void Allgatherv(Group& g, const void* sendbuf, void* recvbuf, const size_t* recvcounts, size_t element_size) {
  const int32_t n = g.size(), rank = g.rank();
  const std::vector<size_t> offset = BlockOffsets(recvcounts, n, element_size);
  const size_t largest = *std::max_element(recvcounts, recvcounts + n) * element_size;
  const Signature signature{Collective::kAllgatherv,
                            -1,
                            -1,
                            -1,
                            Sum(recvcounts, n) * element_size,
                            CountsDigest(recvcounts, (size_t)n, element_size)};
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  const uint8_t* mine = static_cast<const uint8_t*>(sendbuf);
  for (size_t done = 0; done < largest; done += g.slot_bytes()) {
    g.AwaitSlotFree();
    size_t own = PieceOf(recvcounts[rank] * element_size, done, g.slot_bytes());
    if (own) std::memcpy(g.slot(rank), mine + done, own);
    AwaitPiece(g, signature, done);
    for (int32_t m = 0; m < n; ++m) {
      size_t b = PieceOf(recvcounts[m] * element_size, done, g.slot_bytes());
      const uint8_t* from = m == rank ? mine + done : g.slot(m);
      if (b && out + offset[m] + done != from) std::memcpy(out + offset[m] + done, from, b);
    }
    g.MarkSlotRead(g.Publish());
  }
}

void Broadcast(Group& g, void* buf, size_t bytes, int32_t root) {
  uint8_t* data = static_cast<uint8_t*>(buf);
  const Signature signature{Collective::kBroadcast, root, -1, -1, bytes, 0};
  for (size_t done = 0; done < bytes; done += g.slot_bytes()) {
    size_t b = PieceOf(bytes, done, g.slot_bytes());
    if (done == 0) {
      // Every member checks the signatures: all of them wait for this step, not only the root.
      g.AwaitSlotFree();
      if (g.rank() == root) std::memcpy(g.slot(root), data, b);
      g.OpenStep(signature);
    } else {
      if (g.rank() == root) {
        g.AwaitSlotFree();
        std::memcpy(g.slot(root), data + done, b);
      }
      uint32_t written = g.Publish();  // every member publishes every step: steps stay in lockstep
      if (g.rank() != root) g.Await(root, written);
    }
    if (g.rank() != root) std::memcpy(data + done, g.slot(root), b);
    g.MarkSlotRead(g.Publish());
  }
}

void Reducescatter(Group& g, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                   hvd_reduce_op op) {
  const size_t element = hvd::dtype_size(dtype);
  const int32_t n = g.size(), rank = g.rank();
  size_t total = 0, first = 0;  // this member's block: elements [first, first + recvcounts[rank])
  for (int32_t m = 0; m < n; ++m) {
    if (m == rank) first = total;
    total += recvcounts[m];
  }
  const size_t last = first + recvcounts[rank], per_piece = g.slot_bytes() / element;
  const Signature signature{Collective::kReducescatter,
                            -1,
                            (int32_t)dtype,
                            (int32_t)op,
                            total * element,
                            CountsDigest(recvcounts, (size_t)n, element)};
  const uint8_t* in = static_cast<const uint8_t*>(sendbuf);
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  for (size_t done = 0; done < total; done += per_piece) {
    const size_t c = std::min(per_piece, total - done);
    g.AwaitSlotFree();
    std::memcpy(g.slot(rank), in + done * element, c * element);
    AwaitPiece(g, signature, done);
    const size_t from = std::max(first, done), to = std::min(last, done + c);  // this member's share of the piece
    if (from < to) FoldSlots(g, (from - done) * element, out + (from - first) * element, to - from, dtype, op);
    g.MarkSlotRead(g.Publish());
  }
}

void Alltoallv(Group& g, const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
               size_t element_size) {
  const int32_t n = g.size(), rank = g.rank();
  // First every member publishes its send counts: a receiver needs to know where its block lies
  // in each sender's stream (below), and how many windows the longest stream needs.
  std::vector<size_t> counts(sendcounts, sendcounts + n);
  if (sizeof(size_t) * (size_t)n > g.slot_bytes()) throw Failure{HVD_ERR_UNSUPPORTED, "too many members for the slot"};
  const Signature signature{Collective::kAlltoallv, -1, -1, -1, 0, element_size};
  g.AwaitSlotFree();
  std::memcpy(g.slot(rank), counts.data(), sizeof(size_t) * n);
  g.OpenStep(signature);
  // A sender's stream is its send buffer without the block it keeps for itself.
  std::vector<size_t> block_start(n), block_bytes(n);  // of the block for this member, in each sender's stream
  size_t longest = 0;
  for (int32_t p = 0; p < n; ++p) {
    const size_t* theirs = reinterpret_cast<const size_t*>(g.slot(p));
    size_t stream = 0;
    for (int32_t q = 0; q < n; ++q) {
      if (q == p) continue;
      if (q == rank) block_start[p] = stream * element_size;
      stream += theirs[q];
    }
    block_bytes[p] = theirs[rank] * element_size;
    longest = std::max(longest, stream * element_size);
    if (theirs[rank] != recvcounts[p]) {
      throw Failure{HVD_ERR_INVALID_ARGUMENT, "rank " + std::to_string(p) + " sends " + std::to_string(theirs[rank]) +
                                                  " elements to this member, which expects " +
                                                  std::to_string(recvcounts[p])};
    }
  }
  g.MarkSlotRead(g.Publish());
  const std::vector<size_t> recv_offset = BlockOffsets(recvcounts, n, element_size);
  const uint8_t* in = static_cast<const uint8_t*>(sendbuf);
  uint8_t* out = static_cast<uint8_t*>(recvbuf);
  const size_t kept_start = BlockOffsets(sendcounts, n, element_size)[rank];  // in this member's send buffer
  const size_t kept = counts[rank] * element_size, stream = Sum(sendcounts, n) * element_size - kept;
  if (kept) std::memcpy(out + recv_offset[rank], in + kept_start, kept);
  // Then each stream moves through its member's slot, one window at a time, and every receiver
  // copies the part of its block that lies in each sender's window.
  for (size_t window = 0; window < longest; window += g.slot_bytes()) {
    g.AwaitSlotFree();
    const size_t end = window + PieceOf(stream, window, g.slot_bytes());
    if (window < std::min(end, kept_start)) std::memcpy(g.slot(rank), in + window, std::min(end, kept_start) - window);
    const size_t after = std::max(window, kept_start);  // stream bytes after the kept block
    if (after < end) std::memcpy(g.slot(rank) + (after - window), in + after + kept, end - after);
    g.AwaitAll(g.Publish());
    for (int32_t p = 0; p < n; ++p) {
      if (p == rank) continue;
      size_t from = std::max(block_start[p], window);
      size_t to = std::min(block_start[p] + block_bytes[p], window + g.slot_bytes());
      if (from < to)
        std::memcpy(out + recv_offset[p] + (from - block_start[p]), g.slot(p) + (from - window), to - from);
    }
    g.MarkSlotRead(g.Publish());
  }
}

void Barrier(Group& g) {
  const Signature signature{Collective::kBarrier, -1, -1, -1, 0, 0};
  g.AwaitSlotFree();  // every peer has checked the previous collective's signature
  g.OpenStep(signature);
  g.MarkSlotRead(g.Publish());  // ... and the next collective waits until every peer checked this one
}

}  // namespace hvd_shm
