#include "execution/adasum_math.h"

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "horovod/hvd_reduce.hpp"

// The loops below are written for the compiler's vectoriser (independent lanes, no reduction it
// would have to reorder), and compiled a second time for AVX2, chosen at run time as hvd_reduce_simd.hpp
// chooses its level (HOROVOD_REDUCE_SIMD caps it). The engine is compiled for size (-Os); this
// file is not (CMakeLists.txt).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HVD_ADASUM_AVX2 1
#define HVD_ADASUM_INLINE inline __attribute__((always_inline))
#else
#define HVD_ADASUM_INLINE inline
#endif

namespace hvdcore {
namespace {

// Squared norms below this give a coefficient of 1: dividing by them would overflow (a vector of
// zeros, as a joined rank contributes, is left as it is).
const double kSmallestNormSq = std::sqrt(DBL_MIN);

// Partial sums kept per lane (element i in lane i % kLanes) and added in lane order at the end:
// the vectoriser's independent accumulators, and the same result on every run.
constexpr size_t kLanes = 8;

struct FromFloat {
  double operator()(float x) const { return x; }
};
struct FromDouble {
  double operator()(double x) const { return x; }
};
struct FromHalf {
  double operator()(uint16_t x) const { return hvd::half_to_float(x); }
};
struct FromBfloat {
  double operator()(uint16_t x) const { return hvd::bfloat_to_float(x); }
};
struct ToFloat {
  float operator()(double x) const { return (float)x; }
};
struct ToDouble {
  double operator()(double x) const { return x; }
};
struct ToHalf {
  uint16_t operator()(double x) const { return hvd::float_to_half((float)x); }
};
struct ToBfloat {
  uint16_t operator()(double x) const { return hvd::float_to_bfloat((float)x); }
};

template <typename T, typename Load>
HVD_ADASUM_INLINE DotAndNorms Dot(const T* a, const T* b, size_t n, Load load) {
  double dot[kLanes] = {}, aa[kLanes] = {}, bb[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const double x = load(a[i + j]), y = load(b[i + j]);
      dot[j] += x * y;
      aa[j] += x * x;
      bb[j] += y * y;
    }
  }
  for (size_t j = 0; i < n; ++i, ++j) {
    const double x = load(a[i]), y = load(b[i]);
    dot[j] += x * y;
    aa[j] += x * x;
    bb[j] += y * y;
  }
  DotAndNorms d;
  for (size_t j = 0; j < kLanes; ++j) {
    d.dot += dot[j];
    d.a_norm_sq += aa[j];
    d.b_norm_sq += bb[j];
  }
  return d;
}

template <typename T, typename Load, typename Store>
HVD_ADASUM_INLINE void Combine(T* a, double a_coeff, const T* b, double b_coeff, size_t n, Load load, Store store) {
  for (size_t i = 0; i < n; ++i) a[i] = store(a_coeff * load(a[i]) + b_coeff * load(b[i]));
}

#ifdef HVD_ADASUM_AVX2
#define HVD_ADASUM_AVX2_TARGET __attribute__((target("avx2")))
HVD_ADASUM_AVX2_TARGET DotAndNorms DotAvx2(const float* a, const float* b, size_t n) {
  return Dot(a, b, n, FromFloat());
}
HVD_ADASUM_AVX2_TARGET DotAndNorms DotAvx2(const double* a, const double* b, size_t n) {
  return Dot(a, b, n, FromDouble());
}
HVD_ADASUM_AVX2_TARGET void CombineAvx2(float* a, double ac, const float* b, double bc, size_t n) {
  Combine(a, ac, b, bc, n, FromFloat(), ToFloat());
}
HVD_ADASUM_AVX2_TARGET void CombineAvx2(double* a, double ac, const double* b, double bc, size_t n) {
  Combine(a, ac, b, bc, n, FromDouble(), ToDouble());
}
bool UseAvx2() { return hvd::simd::level() != hvd::simd::Level::kPortable; }
#endif

// float32 and float64: the AVX2 build of the loops where the CPU has it.
template <typename T, typename Load>
DotAndNorms DotWide(const T* a, const T* b, size_t n, Load load) {
#ifdef HVD_ADASUM_AVX2
  if (UseAvx2()) return DotAvx2(a, b, n);
#endif
  return Dot(a, b, n, load);
}
template <typename T, typename Load, typename Store>
void CombineWide(T* a, double ac, const T* b, double bc, size_t n, Load load, Store store) {
#ifdef HVD_ADASUM_AVX2
  if (UseAvx2()) return CombineAvx2(a, ac, b, bc, n);
#endif
  Combine(a, ac, b, bc, n, load, store);
}

}  // namespace

bool AdasumDtype(hvd_dtype dtype) {
  return dtype == HVD_DTYPE_FLOAT16 || dtype == HVD_DTYPE_BFLOAT16 || dtype == HVD_DTYPE_FLOAT32 ||
         dtype == HVD_DTYPE_FLOAT64;
}

DotAndNorms PartialDotAndNorms(hvd_dtype dtype, const void* a, const void* b, size_t n) {
  switch (dtype) {
    case HVD_DTYPE_FLOAT16: return Dot((const uint16_t*)a, (const uint16_t*)b, n, FromHalf());
    case HVD_DTYPE_BFLOAT16: return Dot((const uint16_t*)a, (const uint16_t*)b, n, FromBfloat());
    case HVD_DTYPE_FLOAT32: return DotWide((const float*)a, (const float*)b, n, FromFloat());
    case HVD_DTYPE_FLOAT64: return DotWide((const double*)a, (const double*)b, n, FromDouble());
    default: return {};
  }
}

double AdasumCoefficient(double dot, double own_norm_sq) {
  return own_norm_sq < kSmallestNormSq ? 1.0 : 1.0 - dot / (2.0 * own_norm_sq);
}

void ScaledAdd(hvd_dtype dtype, void* a, double a_coeff, const void* b, double b_coeff, size_t n) {
  switch (dtype) {
    case HVD_DTYPE_FLOAT16: Combine((uint16_t*)a, a_coeff, (const uint16_t*)b, b_coeff, n, FromHalf(), ToHalf()); break;
    case HVD_DTYPE_BFLOAT16:
      Combine((uint16_t*)a, a_coeff, (const uint16_t*)b, b_coeff, n, FromBfloat(), ToBfloat());
      break;
    case HVD_DTYPE_FLOAT32: CombineWide((float*)a, a_coeff, (const float*)b, b_coeff, n, FromFloat(), ToFloat()); break;
    case HVD_DTYPE_FLOAT64:
      CombineWide((double*)a, a_coeff, (const double*)b, b_coeff, n, FromDouble(), ToDouble());
      break;
    default: break;
  }
}

}  // namespace hvdcore
