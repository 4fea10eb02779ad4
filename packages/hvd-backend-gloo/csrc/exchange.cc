// The pairwise exchange, and alltoallv on top of it (over TCP; members on one host use shared
// memory, shm_collectives.cc).
//
// Not gloo::alltoallv: that one sends and waits for a message to and from every peer, also for
// empty blocks; an exchange that skips empty blocks needs no message at all for them, and waiting
// on one peer at a time lets a failure name the peer that did not deliver.
#include "exchange.h"

#include <chrono>
#include <cstring>
#include <memory>

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "elements.h"
#include "errors.h"
#include "shm_group.h"

namespace hvd_gloo {
namespace {

constexpr uint8_t kAlltoallvSlotPrefix = 0x41;  // Gloo's own prefixes are 0x01..0x08

std::chrono::milliseconds Left(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  // At least 1 ms: Gloo reads -1 ms as "use the context's default timeout".
  return std::max(left, std::chrono::milliseconds(1));
}

}  // namespace

void Exchange(hvd_comm* comm, uint8_t slot_prefix, const std::vector<Transfer>& transfers,
              const std::function<void(int32_t)>& arrived) {
  const int32_t n = comm->size, rank = comm->rank;
  const auto deadline = std::chrono::steady_clock::now() + comm->timeout;
  const uint64_t slot = gloo::Slot::build(slot_prefix, 0);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends(n), recvs(n);
  for (int32_t i = 1; i < n; ++i) {  // staggered, so that not every member sends to rank 0 first
    int32_t to = (rank + i) % n, from = (rank - i + n) % n;
    const Transfer& in = transfers[from];
    if (in.recv_bytes) {
      recvs[from] = comm->context->createUnboundBuffer(in.recv, in.recv_bytes);
      recvs[from]->recv(from, slot);
    }
    const Transfer& out = transfers[to];
    if (out.send_bytes) {
      sends[to] = comm->context->createUnboundBuffer(const_cast<void*>(out.send), out.send_bytes);
      sends[to]->send(to, slot);
    }
  }
  for (int32_t p = 0; p < n; ++p) {
    if (recvs[p]) {
      comm->waiting_on = {p};
      recvs[p]->waitRecv(Left(deadline));
    }
    if (arrived) arrived(p);
  }
  for (int32_t p = 0; p < n; ++p) {
    if (sends[p]) {
      comm->waiting_on = {p};
      sends[p]->waitSend(Left(deadline));
    }
  }
  comm->waiting_on.clear();
}

int Alltoallv(hvd_comm* comm, const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
              hvd_dtype dtype) {
  if (!KnownDtype(dtype) || !sendcounts || !recvcounts) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT, "gloo alltoall (" + Describe(comm) + "): unknown dtype or no counts");
  }
  const int32_t n = comm->size, rank = comm->rank;
  if (sendcounts[rank] != recvcounts[rank]) {
    return Fail(comm, HVD_ERR_INVALID_ARGUMENT,
                "gloo alltoall (" + Describe(comm) + "): this member sends itself " + std::to_string(sendcounts[rank]) +
                    " elements but expects " + std::to_string(recvcounts[rank]));
  }
  const size_t element_size = hvd::dtype_size(dtype);
  std::vector<Transfer> transfers(n);
  size_t send_offset = 0, recv_offset = 0;
  for (int32_t p = 0; p < n; ++p) {
    transfers[p].send = static_cast<const uint8_t*>(sendbuf) + send_offset;
    transfers[p].send_bytes = sendcounts[p] * element_size;
    transfers[p].recv = static_cast<uint8_t*>(recvbuf) + recv_offset;
    transfers[p].recv_bytes = recvcounts[p] * element_size;
    send_offset += transfers[p].send_bytes;
    recv_offset += transfers[p].recv_bytes;
  }
  if (n > 1 && comm->shm) {
    return Guarded(comm, "alltoall",
                   [&] { ShmAlltoallv(*comm->shm, sendbuf, sendcounts, recvbuf, recvcounts, element_size); });
  }
  if (transfers[rank].send_bytes) std::memcpy(transfers[rank].recv, transfers[rank].send, transfers[rank].send_bytes);
  if (n == 1) return HVD_OK;
  return Guarded(comm, "alltoall", [&] { Exchange(comm, kAlltoallvSlotPrefix, transfers, nullptr); });
}

}  // namespace hvd_gloo
