// Element-wise reductions as function pointers, for every hvd dtype and op: what Gloo's ring
// reduces with (tcp/collectives.cc), and whether a (dtype, op) is known at all (collectives.cc).
//
// Gloo's own gloo::sum/min/max know nothing of bfloat16, of hvd's bool semantics (MIN/PRODUCT =
// AND, MAX/SUM = OR) or of NaN propagation in min/max; hvd_reduce.hpp has all of it, shared with
// the engine, so every backend reduces alike.
#pragma once

#include <cstddef>

#include "horovod/hvd_backend.h"

namespace hvd_common {

// c[i] = a[i] op b[i] for n elements (c may equal a or b): the signature of AllreduceOptions::Func.
using ReduceFn = void (*)(void* c, const void* a, const void* b, size_t n);

// The function for (dtype, op), or nullptr when either is unknown.
ReduceFn ReduceFunction(hvd_dtype dtype, hvd_reduce_op op);

}  // namespace hvd_common
