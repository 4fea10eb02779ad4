// How a communicator's collectives move data. Each communicator gets one Transport when it is
// created (ChooseTransport), so the ABI functions (collectives.cc) check their arguments and hand
// the call to it, and no collective asks which transport it is on.
//
//  - local: a communicator of one member; every collective is a local copy (local_transport.cc);
//  - shared memory: every member on this host (shm_transport.cc, on csrc/shm/);
//  - tcp: Gloo's ring algorithms over its TCP pairs, and direct transfers on connections of the
//    backend's own (csrc/tcp/).
//
// Send and recv are not collectives: they always go over Gloo's TCP pairs (tcp/p2p.cc), which
// every communicator of several members has, whatever carries its collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "horovod/hvd_backend.h"

struct hvd_comm;

namespace hvd_common {
class BufferList;
}

namespace hvd_gloo {

class StoreAdapter;

class Transport {
 public:
  virtual ~Transport() = default;

  // What hvd_gloo_transport reports: "local", "shared memory" or "tcp".
  virtual const char* name() const = 0;
  // Whether the collectives cross a network, where sending data ahead pays (tcp/eager.h).
  virtual bool OverNetwork() const { return false; }

  // The collectives of the ABI (horovod/hvd_backend.h), with its contracts. collectives.cc calls
  // them inside Guarded() (errors.h), once the arguments are checked and empty allreduces,
  // allgathers and broadcasts have returned; they report failures by throwing.
  virtual void Allreduce(const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op) = 0;
  // The extension's multi-buffer allreduce (hvd_backend_ext_v1): every result multiplied by
  // `postscale`. Never called with no elements at all.
  virtual void AllreduceBuffers(const hvd_common::BufferList& buffers, hvd_dtype dtype, hvd_reduce_op op,
                                double postscale) = 0;
  virtual void Allgatherv(const void* sendbuf, void* recvbuf, const size_t* recvcounts, size_t element_size) = 0;
  virtual void Broadcast(void* buf, size_t count, size_t element_size, int32_t root) = 0;
  virtual void Alltoallv(const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
                         size_t element_size) = 0;
  virtual void Reducescatter(const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                             hvd_reduce_op op) = 0;
  virtual void Barrier() = 0;
};

// The transport of a communicator of one member.
std::unique_ptr<Transport> MakeLocalTransport();

// The transport of a communicator of several members, once Gloo has connected them
// (tcp/connect.h): shared memory when every member runs on this host and none turned it off
// (HOROVOD_GLOO_SHARED_MEMORY), else Gloo over TCP. Every member makes the same choice, from what
// all of them publish in the store. Throws what the store adapter throws.
std::unique_ptr<Transport> ChooseTransport(hvd_comm* comm, StoreAdapter& store);

}  // namespace hvd_gloo
