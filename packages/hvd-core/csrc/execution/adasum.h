// Adasum (op=hvd.Adasum; Maleki et al., "Scaling Distributed Training with Adaptive Summation",
// MLSys 2021), built from two collectives every backend has, alltoallv and allreduce, so that it
// runs on every backend, a third party's included.
//
// Two vectors a and b combine as (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b: their sum when
// they are orthogonal, their mean when parallel. Each tensor of a fused buffer is a vector of its
// own (its own dot product and norms). The members combine as Horovod's tree does: recursive
// vector halving, distance doubling. At level L (1, 2, 4, ...) member r pairs with r ^ L; the lower
// of the two keeps the first half of the part both hold (the smaller half when it is odd) and
// sends the other, and each combines the half it keeps with its partner's, the dot products and
// norms summed over the 2L members that hold the pieces of the two vectors. Then the halves travel
// back the same way, and every member ends with every piece: the same bits everywhere.
//
// Beyond Horovod, any number of members: with n = 2^k + m, member 2^k + i (i < m) first sends its
// vector to member i, which combines the two (its own as a); the 2^k members run the tree; member
// i sends the result back to member 2^k + i.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend_loader.h"
#include "core/common.h"

namespace hvdcore {

// Combines every member's `buffer` (tensors of `counts` elements each, back to back, of `dtype`:
// see AdasumDtype) in place. `scratch` is grown to the buffer's size and used for what arrives.
// Every member of `comm` calls it alike.
Status AdasumAllreduce(Comm& comm, uint8_t* buffer, const std::vector<size_t>& counts, hvd_dtype dtype,
                       std::vector<uint8_t>& scratch);

}  // namespace hvdcore
