// The backend's function tables and their exported entry points.
#include "collectives.h"
#include "watchdog.h"

#ifndef HVD_BACKEND_NCCL_VERSION
#define HVD_BACKEND_NCCL_VERSION "0.0.0+unknown"
#endif

namespace {

const hvd_backend_v1 kTable = {
    HVD_BACKEND_ABI_VERSION,
    sizeof(hvd_backend_v1),
    "nccl",
    HVD_BACKEND_NCCL_VERSION,
    HVD_DEVICE_CUDA,
    0,  // reserved
    // NCCL reduces float16 and bfloat16 itself. No send/recv: NCCL carries no tags.
    HVD_CAP_LOW_PRECISION,
    hvd_nccl::CommCreate,
    hvd_nccl::CommDestroy,
    hvd_nccl::LastError,
    hvd_nccl::Allreduce,
    hvd_nccl::Allgatherv,
    hvd_nccl::Broadcast,
    hvd_nccl::Alltoallv,
    hvd_nccl::Reducescatter,
    hvd_nccl::Barrier,
    nullptr,
    nullptr,
};

hvd_backend_ext_v1 MakeExtensions() {
  hvd_backend_ext_v1 ext{};
  ext.struct_size = sizeof(hvd_backend_ext_v1);
  ext.allreduce_buffers = hvd_nccl::AllreduceBuffers;  // the engine's fusion and scaling, inside NCCL
  // No eager messages: a device communicator's data never waits in host memory.
  ext.async_error = hvd_nccl::AsyncError;
  ext.abort = hvd_nccl::Abort;
  return ext;
}

const hvd_backend_ext_v1 kExtensions = MakeExtensions();

}  // namespace

extern "C" HVD_BACKEND_EXPORT const hvd_backend_v1* hvd_backend_v1_get(void) { return &kTable; }
extern "C" HVD_BACKEND_EXPORT const hvd_backend_ext_v1* hvd_backend_ext_v1_get(void) { return &kExtensions; }
