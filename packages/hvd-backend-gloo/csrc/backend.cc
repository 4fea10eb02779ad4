// The backend's function tables and its exported symbols: hvd_backend_v1_get, the optional
// extensions' hvd_backend_ext_v1_get, and hvd_gloo_transport for diagnostics.
#include "comm.h"

#ifndef HVD_BACKEND_GLOO_VERSION
#define HVD_BACKEND_GLOO_VERSION "0.0.0+unknown"
#endif

namespace {

const hvd_backend_v1 kTable = {
    HVD_BACKEND_ABI_VERSION,
    sizeof(hvd_backend_v1),
    "gloo",
    HVD_BACKEND_GLOO_VERSION,
    HVD_DEVICE_CPU,
    0,                  // reserved
    // send/recv on unbound buffers; float16 and bfloat16 are reduced directly (hvd_reduce.hpp's
    // loops, as the in-memory backend does), so the engine need not widen them.
    HVD_CAP_SEND_RECV | HVD_CAP_LOW_PRECISION,
    hvd_gloo::CommCreate,
    hvd_gloo::CommDestroy,
    hvd_gloo::LastError,
    hvd_gloo::Allreduce,
    hvd_gloo::Allgatherv,
    hvd_gloo::Broadcast,
    hvd_gloo::Alltoallv,
    hvd_gloo::Reducescatter,
    hvd_gloo::Barrier,
    hvd_gloo::Send,
    hvd_gloo::Recv,
};

const hvd_backend_ext_v1 kExtensions = {
    sizeof(hvd_backend_ext_v1),
    0,  // reserved
    hvd_gloo::AllreduceBuffers,
    hvd_gloo::EagerOpen,
    hvd_gloo::EagerSend,
    hvd_gloo::EagerWaitSent,
    hvd_gloo::EagerReceive,
    hvd_gloo::EagerRelease,
    hvd_gloo::EagerReceiveInto,
};

}  // namespace

extern "C" HVD_BACKEND_EXPORT const hvd_backend_v1* hvd_backend_v1_get(void) { return &kTable; }

extern "C" HVD_BACKEND_EXPORT const hvd_backend_ext_v1* hvd_backend_ext_v1_get(void) { return &kExtensions; }

// Which transport carries `comm`'s collectives (transport.h): "shared memory" (every member on
// this host), "tcp", or "local" (a communicator of one member).
extern "C" HVD_BACKEND_EXPORT const char* hvd_gloo_transport(const hvd_comm* comm) {
  return comm ? comm->transport->name() : "local";
}
