#include "negotiation/eager.h"

#include <cstring>

namespace hvdcore {

Status OpenEager(Comm* comm, size_t record_bytes, size_t data_bytes, EagerChannel* records, EagerChannel* data) {
  records->Bind(comm, 0, 0);
  data->Bind(comm, 1, 0);
  if (data_bytes == 0 || record_bytes == 0 || comm->size() < 2 || !comm->backend().has_eager()) return Status::Ok();
  bool opened = false;
  Status st = comm->EagerOpen({record_bytes, data_bytes}, &opened);
  if (st.ok() && opened) {
    records->Bind(comm, 0, record_bytes);
    data->Bind(comm, 1, data_bytes);
  }
  return st;
}

Status EagerChannel::Send(int32_t slot, const std::vector<Part>& parts) {
  for (int32_t p = 0; p < comm_->size(); ++p) {
    if (p == comm_->rank()) continue;
    Status st = comm_->EagerSend(channel_, p, parts[p].data, parts[p].bytes);
    if (!st.ok()) return st;
  }
  sent_slot_ = slot;
  return Status::Ok();
}

Status EagerChannel::Settle() {
  sent_slot_ = -1;
  for (int32_t p = 0; p < comm_->size(); ++p) {
    if (p == comm_->rank()) continue;
    Status st = comm_->EagerWaitSent(channel_, p);
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

Status EagerChannel::Take(int32_t peer, void* dst, size_t bytes) {
  if (dst && bytes && comm_->backend().has_eager_receive_into())
    return comm_->EagerReceiveInto(channel_, peer, dst, bytes);
  return Take(peer, [&](const uint8_t* message) {  // receive, copy, release
    if (dst && bytes) std::memcpy(dst, message, bytes);
    return Status::Ok();
  });
}

}  // namespace hvdcore
