// The communicator behind the opaque hvd_comm handle, shared by every source of the backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include "horovod/hvd_backend.h"
#include "tcp/eager.h"
#include "transport.h"

struct hvd_comm {
  int32_t rank = 0;
  int32_t size = 1;
  std::vector<int32_t> job_ranks;  // job-level rank of each member, for messages
  std::chrono::milliseconds timeout{30000};
  // Gloo's TCP pairs to every peer (tcp/connect.h): send/recv use them, and so do the collectives
  // when the transport is TCP. The device is declared before the context so that the context (and
  // its pairs) is destroyed first. Both are null for a communicator of one member.
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::Context> context;
  std::string device_description;  // where this member listens, for connection errors
  // What carries the collectives, chosen once at creation (transport.h). Declared after the
  // context, so destroyed first: the TCP transport works on the context until it is gone.
  std::unique_ptr<hvd_gloo::Transport> transport;
  // Eager messages' connections and space (tcp/eager.h), once opened.
  std::unique_ptr<hvd_gloo::Links> eager;

  std::string last_error;
  // After a collective fails (Gloo threw, or a peer on shared memory was lost or out of step), the
  // communicator is unusable: later calls fail at once with this reason.
  int broken_status = HVD_OK;
  std::string broken_reason;
  // Communicator ranks this member was waiting on in the current call (named on a failure).
  std::vector<int32_t> waiting_on;
};

namespace hvd_gloo {

// "rank 1" (the job rank of communicator member r).
std::string RankName(const hvd_comm* comm, int32_t r);
// "rank 0 of 2" or "rank 0 of 2 (job ranks 0, 3)" when the communicator is a process set.
std::string Describe(const hvd_comm* comm);

// The ABI functions, installed in the hvd_backend_v1 table by backend.cc: the communicator's life
// here, the collectives in collectives.cc, send and recv in tcp/p2p.cc.
int CommCreate(const hvd_comm_config_v1* config, const hvd_store_v1* store, hvd_comm** out, char* error,
               size_t error_len);
void CommDestroy(hvd_comm* comm);
const char* LastError(const hvd_comm* comm);
int Allreduce(hvd_comm* comm, const void* sendbuf, void* recvbuf, size_t count, hvd_dtype dtype, hvd_reduce_op op);
// The extension table's (hvd_backend_ext_v1).
int AllreduceBuffers(hvd_comm* comm, const hvd_buffer_pair* buffers, size_t n, hvd_dtype dtype, hvd_reduce_op op,
                     double postscale);
int Allgatherv(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype);
int Broadcast(hvd_comm* comm, void* buf, size_t count, hvd_dtype dtype, int32_t root);
int Alltoallv(hvd_comm* comm, const void* sendbuf, const size_t* sendcounts, void* recvbuf, const size_t* recvcounts,
              hvd_dtype dtype);
int Reducescatter(hvd_comm* comm, const void* sendbuf, void* recvbuf, const size_t* recvcounts, hvd_dtype dtype,
                  hvd_reduce_op op);
int Barrier(hvd_comm* comm);
int Send(hvd_comm* comm, const void* buf, size_t bytes, int32_t peer, int32_t tag);
int Recv(hvd_comm* comm, void* buf, size_t bytes, int32_t peer, int32_t tag);

}  // namespace hvd_gloo
