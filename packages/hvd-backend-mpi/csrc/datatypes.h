// hvd's dtypes and reduce ops in MPI's terms, with hvd's semantics (hvd_reduce.hpp) everywhere.
//
// MPI's predefined operations are used where they agree with hvd's: integer and floating sums and
// products, integer min/max, bool as logical and/or on bytes. The rest are MPI user operations
// running hvd_reduce.hpp's loops: float16 and bfloat16 (MPI has no portable 16-bit float type;
// they travel as 16-bit integers), and floating min/max (hvd propagates NaN whichever rank holds it;
// MPI's MIN/MAX do not promise to).
#pragma once

#include <mpi.h>

#include "horovod/hvd_backend.h"

namespace hvd_mpi {

// The MPI datatype carrying `dtype`'s elements; MPI_DATATYPE_NULL for an unknown dtype.
MPI_Datatype DatatypeOf(hvd_dtype dtype);

// The MPI operation reducing `dtype` by `op`; MPI_OP_NULL for an unknown dtype or op. User
// operations are created on first use (MPI must be initialised) and live as long as the process.
MPI_Op OpOf(hvd_dtype dtype, hvd_reduce_op op);

}  // namespace hvd_mpi
