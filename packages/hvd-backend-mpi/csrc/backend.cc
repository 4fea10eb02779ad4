// The backend's function table and its exported entry point, hvd_backend_v1_get.
#include "comm.h"

#ifndef HVD_BACKEND_MPI_VERSION
#define HVD_BACKEND_MPI_VERSION "0.0.0+unknown"
#endif

namespace {

const hvd_backend_v1 kTable = {
    HVD_BACKEND_ABI_VERSION,
    sizeof(hvd_backend_v1),
    "mpi",
    HVD_BACKEND_MPI_VERSION,
    HVD_DEVICE_CPU,
    0,  // reserved
    // Point to point on MPI_Send/MPI_Recv; float16 and bfloat16 are reduced by MPI with user
    // operations (hvd_reduce.hpp's loops), so the engine need not widen them.
    HVD_CAP_SEND_RECV | HVD_CAP_LOW_PRECISION,
    hvd_mpi::CommCreate,
    hvd_mpi::CommDestroy,
    hvd_mpi::LastError,
    hvd_mpi::Allreduce,
    hvd_mpi::Allgatherv,
    hvd_mpi::Broadcast,
    hvd_mpi::Alltoallv,
    hvd_mpi::Reducescatter,
    hvd_mpi::Barrier,
    hvd_mpi::Send,
    hvd_mpi::Recv,
};

}  // namespace

extern "C" HVD_BACKEND_EXPORT const hvd_backend_v1* hvd_backend_v1_get(void) { return &kTable; }
