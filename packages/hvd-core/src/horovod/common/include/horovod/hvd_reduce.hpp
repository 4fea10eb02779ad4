// hvd_reduce.hpp: header-only element-wise reductions and scaling over hvd_dtype buffers.
//
// Shared by the engine and by backends that reduce on the host (a backend whose transport has no
// native float16/bfloat16 or bool reduction calls these). Everything is inline and templated, so
// including it creates no ABI dependency on hvd-core.
#ifndef HVD_REDUCE_HPP_
#define HVD_REDUCE_HPP_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "horovod/hvd_backend.h"
#include "horovod/hvd_reduce_simd.hpp"

namespace hvd {

// IEEE binary16 <-> float, round-to-nearest-even; handles subnormals, infinities and NaN.
inline float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3FFu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t absx = x & 0x7FFFFFFFu;
  if (absx >=
      0x7F800000u) {  // inf, or NaN made quiet keeping its payload's top bits (as F16C does)
    return (uint16_t)(sign | 0x7C00u |
                      (absx > 0x7F800000u ? 0x200u | ((absx >> 13) & 0x3FFu) : 0u));
  }
  if (absx >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  // overflows to inf
  if (absx < 0x38800000u) {                                     // subnormal or zero in half
    if (absx < 0x33000000u) return sign;
    uint32_t mant = (absx & 0x7FFFFFu) | 0x800000u;
    int shift = 113 - (int)(absx >> 23) + 13;
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return (uint16_t)(sign | half_mant);
  }
  uint32_t rounded = absx + 0xFFFu + ((absx >> 13) & 1u) - ((127u - 15u) << 23);
  return (uint16_t)(sign | (rounded >> 13));
}

inline float bfloat_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t float_to_bfloat(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7FFFu + ((x >> 16) & 1u);  // round to nearest even
  return (uint16_t)(x >> 16);
}

inline size_t dtype_size(hvd_dtype dtype) {
  switch (dtype) {
    case HVD_DTYPE_UINT8:
    case HVD_DTYPE_INT8:
    case HVD_DTYPE_BOOL: return 1;
    case HVD_DTYPE_INT16:
    case HVD_DTYPE_FLOAT16:
    case HVD_DTYPE_BFLOAT16: return 2;
    case HVD_DTYPE_INT32:
    case HVD_DTYPE_FLOAT32: return 4;
    case HVD_DTYPE_INT64:
    case HVD_DTYPE_FLOAT64: return 8;
  }
  return 0;
}

inline const char* dtype_name(hvd_dtype dtype) {
  switch (dtype) {
    case HVD_DTYPE_UINT8: return "uint8";
    case HVD_DTYPE_INT8: return "int8";
    case HVD_DTYPE_INT16: return "int16";
    case HVD_DTYPE_INT32: return "int32";
    case HVD_DTYPE_INT64: return "int64";
    case HVD_DTYPE_FLOAT16: return "float16";
    case HVD_DTYPE_BFLOAT16: return "bfloat16";
    case HVD_DTYPE_FLOAT32: return "float32";
    case HVD_DTYPE_FLOAT64: return "float64";
    case HVD_DTYPE_BOOL: return "bool";
  }
  return "unknown";
}

namespace detail {

// Signed integer overflow is undefined in C++: integers add and multiply in their unsigned type,
// which wraps around like the hardware (and like the example C backend).
template <typename T>
inline T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return (T)(U)((U)a + (U)b);
  } else {
    return (T)(a + b);
  }
}

template <typename T>
inline T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    // Promote through unsigned int so that uint16-sized products cannot overflow a signed int.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return (T)(U)((W)(U)a * (W)(U)b);
  } else {
    return a * b;
  }
}

// Min and max propagate NaN for every floating type (a NaN anywhere gives NaN), whatever the
// operand order, so results do not depend on which rank holds the NaN.
template <typename T>
inline T nan_min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return b < a ? b : a;
}

template <typename T>
inline T nan_max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a < b ? b : a;
}

template <typename T>
inline void reduce_native(hvd_reduce_op op, T* acc, const T* in, size_t n) {
  switch (op) {
    case HVD_REDUCE_SUM:
      for (size_t i = 0; i < n; ++i) acc[i] = wrap_add(acc[i], in[i]);
      break;
    case HVD_REDUCE_MIN:
      for (size_t i = 0; i < n; ++i) acc[i] = nan_min(acc[i], in[i]);
      break;
    case HVD_REDUCE_MAX:
      for (size_t i = 0; i < n; ++i) acc[i] = nan_max(acc[i], in[i]);
      break;
    case HVD_REDUCE_PRODUCT:
      for (size_t i = 0; i < n; ++i) acc[i] = wrap_mul(acc[i], in[i]);
      break;
  }
}

// float16 / bfloat16: widen to float, reduce, narrow (one rounding per pairwise step). A NaN
// result is the default quiet NaN whatever the op, so that no path (hvd_reduce_simd.hpp's vector
// ones, or this loop as another compiler orders an addition's operands) can pass on another.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
inline void reduce_16bit(hvd_reduce_op op, uint16_t* acc, const uint16_t* in, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float a = ToFloat(acc[i]), b = ToFloat(in[i]), r = a;
    switch (op) {
      case HVD_REDUCE_SUM: r = a + b; break;
      case HVD_REDUCE_MIN: r = nan_min(a, b); break;
      case HVD_REDUCE_MAX: r = nan_max(a, b); break;
      case HVD_REDUCE_PRODUCT: r = a * b; break;
    }
    acc[i] = FromFloat(std::isnan(r) ? std::numeric_limits<float>::quiet_NaN() : r);
  }
}

inline void reduce_bool(hvd_reduce_op op, uint8_t* acc, const uint8_t* in, size_t n) {
  bool any = (op == HVD_REDUCE_MAX || op == HVD_REDUCE_SUM);
  for (size_t i = 0; i < n; ++i) {
    acc[i] = any ? (uint8_t)(acc[i] || in[i]) : (uint8_t)(acc[i] && in[i]);
  }
}

template <typename T>
inline void scale_native(T* buf, size_t n, double factor) {
  for (size_t i = 0; i < n; ++i) buf[i] = (T)((double)buf[i] * factor);
}

template <typename T>
inline void fill_native(T* buf, size_t n, T value) {
  std::fill(buf, buf + n, value);
}

}  // namespace detail

// acc[i] = op(acc[i], in[i]) for n elements. Returns false for an unknown dtype.
inline bool reduce_into(hvd_dtype dtype, hvd_reduce_op op, void* acc, const void* in, size_t n) {
  using namespace detail;
  switch (dtype) {
    case HVD_DTYPE_UINT8: reduce_native(op, (uint8_t*)acc, (const uint8_t*)in, n); return true;
    case HVD_DTYPE_INT8: reduce_native(op, (int8_t*)acc, (const int8_t*)in, n); return true;
    case HVD_DTYPE_INT16: reduce_native(op, (int16_t*)acc, (const int16_t*)in, n); return true;
    case HVD_DTYPE_INT32: reduce_native(op, (int32_t*)acc, (const int32_t*)in, n); return true;
    case HVD_DTYPE_INT64: reduce_native(op, (int64_t*)acc, (const int64_t*)in, n); return true;
    case HVD_DTYPE_FLOAT32: reduce_native(op, (float*)acc, (const float*)in, n); return true;
    case HVD_DTYPE_FLOAT64: reduce_native(op, (double*)acc, (const double*)in, n); return true;
    case HVD_DTYPE_FLOAT16: {  // vector instructions where the CPU has them, the rest portably
      const size_t done =
          simd::reduce_16bit<false>(simd::level(), op, (uint16_t*)acc, (const uint16_t*)in, n);
      reduce_16bit<half_to_float, float_to_half>(op, (uint16_t*)acc + done,
                                                 (const uint16_t*)in + done, n - done);
      return true;
    }
    case HVD_DTYPE_BFLOAT16: {
      const size_t done =
          simd::reduce_16bit<true>(simd::level(), op, (uint16_t*)acc, (const uint16_t*)in, n);
      reduce_16bit<bfloat_to_float, float_to_bfloat>(op, (uint16_t*)acc + done,
                                                     (const uint16_t*)in + done, n - done);
      return true;
    }
    case HVD_DTYPE_BOOL: reduce_bool(op, (uint8_t*)acc, (const uint8_t*)in, n); return true;
  }
  return false;
}

// buf[i] *= factor, computed in double and converted back (integers truncate toward zero).
inline bool scale(hvd_dtype dtype, void* buf, size_t n, double factor) {
  using namespace detail;
  switch (dtype) {
    case HVD_DTYPE_UINT8: scale_native((uint8_t*)buf, n, factor); return true;
    case HVD_DTYPE_INT8: scale_native((int8_t*)buf, n, factor); return true;
    case HVD_DTYPE_INT16: scale_native((int16_t*)buf, n, factor); return true;
    case HVD_DTYPE_INT32: scale_native((int32_t*)buf, n, factor); return true;
    case HVD_DTYPE_INT64: scale_native((int64_t*)buf, n, factor); return true;
    case HVD_DTYPE_FLOAT32: {
      float* p = (float*)buf;
      float f = (float)factor;
      for (size_t i = 0; i < n; ++i) p[i] *= f;
      return true;
    }
    case HVD_DTYPE_FLOAT64: scale_native((double*)buf, n, factor); return true;
    case HVD_DTYPE_FLOAT16: {
      uint16_t* p = (uint16_t*)buf;
      for (size_t i = simd::scale_16bit<false>(simd::level(), p, n, factor); i < n; ++i)
        p[i] = float_to_half((float)(half_to_float(p[i]) * factor));
      return true;
    }
    case HVD_DTYPE_BFLOAT16: {
      uint16_t* p = (uint16_t*)buf;
      for (size_t i = simd::scale_16bit<true>(simd::level(), p, n, factor); i < n; ++i)
        p[i] = float_to_bfloat((float)(bfloat_to_float(p[i]) * factor));
      return true;
    }
    case HVD_DTYPE_BOOL: return false;  // scaling a bool has no meaning
  }
  return false;
}

// Fill with the identity of `op`, the contribution of a rank that has joined.
inline bool fill_identity(hvd_dtype dtype, hvd_reduce_op op, void* buf, size_t n) {
  using namespace detail;
  auto pick = [op](auto zero, auto one, auto lowest, auto highest) {
    switch (op) {
      case HVD_REDUCE_SUM: return zero;
      case HVD_REDUCE_PRODUCT: return one;
      case HVD_REDUCE_MIN: return highest;
      case HVD_REDUCE_MAX: return lowest;
    }
    return zero;
  };
  auto fill = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    T v = pick(T(0), T(1), std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max());
    if (std::numeric_limits<T>::has_infinity) {
      if (op == HVD_REDUCE_MIN) v = std::numeric_limits<T>::infinity();
      if (op == HVD_REDUCE_MAX) v = -std::numeric_limits<T>::infinity();
    }
    fill_native(p, n, v);
  };
  switch (dtype) {
    case HVD_DTYPE_UINT8: fill((uint8_t*)buf); return true;
    case HVD_DTYPE_INT8: fill((int8_t*)buf); return true;
    case HVD_DTYPE_INT16: fill((int16_t*)buf); return true;
    case HVD_DTYPE_INT32: fill((int32_t*)buf); return true;
    case HVD_DTYPE_INT64: fill((int64_t*)buf); return true;
    case HVD_DTYPE_FLOAT32: fill((float*)buf); return true;
    case HVD_DTYPE_FLOAT64: fill((double*)buf); return true;
    case HVD_DTYPE_FLOAT16:
    case HVD_DTYPE_BFLOAT16: {
      float v = pick(0.0f, 1.0f, -INFINITY, INFINITY);
      uint16_t bits = dtype == HVD_DTYPE_FLOAT16 ? float_to_half(v) : float_to_bfloat(v);
      fill_native((uint16_t*)buf, n, bits);
      return true;
    }
    case HVD_DTYPE_BOOL: {
      uint8_t v = (op == HVD_REDUCE_MIN || op == HVD_REDUCE_PRODUCT) ? 1 : 0;
      fill_native((uint8_t*)buf, n, v);
      return true;
    }
  }
  return false;
}

}  // namespace hvd

#endif  // HVD_REDUCE_HPP_
