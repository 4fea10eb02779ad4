// The arithmetic of Adasum (op=hvd.Adasum) on host buffers of any floating dtype: the dot product
// and squared norms of two vectors, the coefficients they give, and the combination. Sums and
// products are taken in double, whatever the dtype, so float16 and bfloat16 lose nothing to them.
#pragma once

#include <cstddef>

#include "horovod/hvd_backend.h"

namespace hvdcore {

// The dtypes Adasum combines: float16, bfloat16, float32, float64.
bool AdasumDtype(hvd_dtype dtype);

struct DotAndNorms {
  double dot = 0, a_norm_sq = 0, b_norm_sq = 0;
};

// a.b, a.a and b.b over n elements.
DotAndNorms PartialDotAndNorms(hvd_dtype dtype, const void* a, const void* b, size_t n);

// The weight of a vector whose squared norm is `own_norm_sq` in its Adasum with another, given
// their dot product: 1 - a.b / (2 |own|^2), or 1 for a vector too small to divide by.
double AdasumCoefficient(double dot, double own_norm_sq);

// a[i] = a_coeff * a[i] + b_coeff * b[i], computed in double and rounded once to the dtype.
void ScaledAdd(hvd_dtype dtype, void* a, double a_coeff, const void* b, double b_coeff, size_t n);

}  // namespace hvdcore
