// The world: the MPI communicator whose ranks are hvd's job ranks, from which every process set's
// communicator is made.
//
// hvd.init() selects it each time (through the Python package, before the engine starts):
//  - init():                a private duplicate of MPI_COMM_WORLD;
//  - init(comm=[0, 2]):     the processes of those MPI_COMM_WORLD ranks;
//  - init(comm=mpi4py_comm): a private duplicate of that communicator.
// Private, so that hvd's traffic never meets the user's own MPI traffic on the same communicator.
// When nothing was selected (the library driven through the C ABI alone), MPI_COMM_WORLD is used.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

namespace hvd_mpi {

// Makes the world from `parent` (restricted to its ranks `ranks` when `nranks` > 0). Collective
// over the new world's members. Returns HVD_OK or a status with `error` set.
int SelectWorld(MPI_Comm parent, const int32_t* ranks, int32_t nranks, std::string* error);

// The current world (MPI_COMM_WORLD when none was selected).
MPI_Comm World();

}  // namespace hvd_mpi
