#include "negotiation/eager.h"

#include <cstring>

namespace hvdcore {

Status EagerChannel::Open(Comm* comm, size_t bytes) {
  comm_ = comm;
  capacity_ = 0;
  if (bytes == 0 || comm->size() < 2 || !comm->backend().has_eager()) return Status::Ok();
  bool opened = false;
  Status st = comm->EagerOpen(bytes, &opened);
  if (st.ok() && opened) capacity_ = bytes;
  return st;
}

Status EagerChannel::Send(int32_t slot, const std::vector<Part>& parts) {
  for (int32_t p = 0; p < comm_->size(); ++p) {
    if (p == comm_->rank()) continue;
    Status st = comm_->EagerSend(p, parts[p].data, parts[p].bytes);
    if (!st.ok()) return st;
  }
  sent_slot_ = slot;
  return Status::Ok();
}

Status EagerChannel::Settle() {
  sent_slot_ = -1;
  for (int32_t p = 0; p < comm_->size(); ++p) {
    if (p == comm_->rank()) continue;
    Status st = comm_->EagerWaitSent(p);
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

Status EagerChannel::Take(int32_t peer, void* dst, size_t bytes) {
  const void* data = nullptr;
  Status st = comm_->EagerReceive(peer, &data);
  if (!st.ok()) return st;
  if (dst && bytes) std::memcpy(dst, data, bytes);
  return comm_->EagerRelease(peer);
}

}  // namespace hvdcore
