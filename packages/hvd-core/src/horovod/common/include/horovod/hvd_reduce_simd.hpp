// hvd_reduce_simd.hpp: float16 and bfloat16 reductions and scaling with x86 vector instructions,
// chosen at run time by what the CPU has (included by hvd_reduce.hpp, which falls back to its
// portable loops elsewhere).
//
// Every path gives the portable code's results bit for bit: each element is widened to float
// (exact), combined with one float operation (or scaled in double, as the portable code does), and
// narrowed with round-to-nearest-even. float16 uses F16C's conversions, which round as the portable
// code does, subnormals included; bfloat16 narrows with integer arithmetic, the portable code's
// own (AVX-512 BF16's conversion flushes subnormals to zero, so it is not used).
//
// HOROVOD_REDUCE_SIMD (read once per library) caps the level: "portable", "avx2" or "avx512"; by
// default the best the CPU has. Header-only like hvd_reduce.hpp: it adds no ABI dependency.
#ifndef HVD_REDUCE_SIMD_HPP_
#define HVD_REDUCE_SIMD_HPP_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "horovod/hvd_backend.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HVD_REDUCE_SIMD_X86 1
#include <immintrin.h>
#endif

namespace hvd {
namespace simd {

enum class Level { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };

// What this CPU can run: AVX2 with F16C, or AVX-512 (F and BW).
inline Level detect() {
#ifdef HVD_REDUCE_SIMD_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
    return Level::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return Level::kAvx2;
#endif
  return Level::kPortable;
}

// The detected level, capped by HOROVOD_REDUCE_SIMD.
inline Level chosen(const char* cap, Level detected) {
  if (!cap || !*cap) return detected;
  Level asked = detected;
  if (!std::strcmp(cap, "portable")) asked = Level::kPortable;
  if (!std::strcmp(cap, "avx2")) asked = Level::kAvx2;
  return (int)asked < (int)detected ? asked : detected;
}

inline Level level() {
  static const Level l = chosen(std::getenv("HOROVOD_REDUCE_SIMD"), detect());
  return l;
}

#ifdef HVD_REDUCE_SIMD_X86

// ---- AVX2 + F16C: 8 elements at a time.

#define HVD_AVX2 __attribute__((target("avx2,f16c")))

// A NaN result is the default quiet NaN, as in the portable code: which NaN operand an addition
// passes on depends on operand order, which a compiler may swap.
HVD_AVX2 inline __m256 avx2_canonical_nan(__m256 r, __m256 nan) {
  return _mm256_blendv_ps(r, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), nan);
}

HVD_AVX2 inline __m256 avx2_combine(hvd_reduce_op op, __m256 a, __m256 b) {
  switch (op) {
    case HVD_REDUCE_SUM:
    case HVD_REDUCE_PRODUCT: {
      __m256 r = op == HVD_REDUCE_SUM ? _mm256_add_ps(a, b) : _mm256_mul_ps(a, b);
      return avx2_canonical_nan(r, _mm256_cmp_ps(r, r, _CMP_UNORD_Q));
    }
    case HVD_REDUCE_MIN:
    case HVD_REDUCE_MAX: {
      // The portable nan_min/nan_max: b < a ? b : a (max: a < b ? b : a), which is the order of
      // MINPS/MAXPS with b first; a NaN in either gives the default quiet NaN.
      __m256 r = op == HVD_REDUCE_MIN ? _mm256_min_ps(b, a) : _mm256_max_ps(b, a);
      return avx2_canonical_nan(r, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
    }
  }
  return a;
}

HVD_AVX2 inline __m256 avx2_load_half(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p));
}
HVD_AVX2 inline void avx2_store_half(uint16_t* p, __m256 v) {
  _mm_storeu_si128((__m128i*)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
HVD_AVX2 inline __m256 avx2_load_bfloat(const uint16_t* p) {
  __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
// Round to nearest even (x + 0x7FFF + bit 16), NaN kept quiet with its payload: float_to_bfloat.
HVD_AVX2 inline void avx2_store_bfloat(uint16_t* p, __m256 v) {
  __m256i x = _mm256_castps_si256(v);
  __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), odd), 16);
  __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  __m256i bits = _mm256_blendv_epi8(rounded, quiet, nan);
  // 32-bit lanes down to 16 bits (every value fits): pack, then put the two halves in order.
  __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0xD8);
  _mm_storeu_si128((__m128i*)p, _mm256_castsi256_si128(packed));
}

// ---- AVX-512 (F, BW): 16 elements at a time.

// GCC 12's AVX-512 intrinsics start from an undefined vector that its -Wmaybe-uninitialized then
// reports, through inlining, in any file including this one (fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define HVD_AVX512 __attribute__((target("avx512f,avx512bw")))

HVD_AVX512 inline __m512 avx512_canonical_nan(__m512 r, __mmask16 nan) {
  return _mm512_mask_blend_ps(nan, r, _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
}

HVD_AVX512 inline __m512 avx512_combine(hvd_reduce_op op, __m512 a, __m512 b) {
  switch (op) {
    case HVD_REDUCE_SUM:
    case HVD_REDUCE_PRODUCT: {
      __m512 r = op == HVD_REDUCE_SUM ? _mm512_add_ps(a, b) : _mm512_mul_ps(a, b);
      return avx512_canonical_nan(r, _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q));
    }
    case HVD_REDUCE_MIN:
    case HVD_REDUCE_MAX: {
      __m512 r = op == HVD_REDUCE_MIN ? _mm512_min_ps(b, a) : _mm512_max_ps(b, a);
      return avx512_canonical_nan(r, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q));
    }
  }
  return a;
}

HVD_AVX512 inline __m512 avx512_load_half(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p));
}
HVD_AVX512 inline void avx512_store_half(uint16_t* p, __m512 v) {
  _mm256_storeu_si256((__m256i*)p,
                      _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
HVD_AVX512 inline __m512 avx512_load_bfloat(const uint16_t* p) {
  __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}
HVD_AVX512 inline void avx512_store_bfloat(uint16_t* p, __m512 v) {
  __m512i x = _mm512_castps_si512(v);
  __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7FFF)), odd), 16);
  __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  _mm256_storeu_si256((__m256i*)p,
                      _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet)));
}

// Bfloat selects the format: float16 (false) or bfloat16 (true).
template <bool Bfloat>
HVD_AVX2 inline __m256 avx2_load(const uint16_t* p) {
  if constexpr (Bfloat) return avx2_load_bfloat(p);
  return avx2_load_half(p);
}
template <bool Bfloat>
HVD_AVX2 inline void avx2_store(uint16_t* p, __m256 v) {
  if constexpr (Bfloat) return avx2_store_bfloat(p, v);
  return avx2_store_half(p, v);
}
template <bool Bfloat>
HVD_AVX512 inline __m512 avx512_load(const uint16_t* p) {
  if constexpr (Bfloat) return avx512_load_bfloat(p);
  return avx512_load_half(p);
}
template <bool Bfloat>
HVD_AVX512 inline void avx512_store(uint16_t* p, __m512 v) {
  if constexpr (Bfloat) return avx512_store_bfloat(p, v);
  return avx512_store_half(p, v);
}

// The vector bodies; each returns how many leading elements it did (the tail is the caller's).
template <bool Bfloat>
HVD_AVX2 inline size_t reduce_avx2(hvd_reduce_op op, uint16_t* acc, const uint16_t* in, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 r = avx2_combine(op, avx2_load<Bfloat>(acc + i), avx2_load<Bfloat>(in + i));
    avx2_store<Bfloat>(acc + i, r);
  }
  return i;
}

template <bool Bfloat>
HVD_AVX512 inline size_t reduce_avx512(hvd_reduce_op op, uint16_t* acc, const uint16_t* in,
                                       size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 r = avx512_combine(op, avx512_load<Bfloat>(acc + i), avx512_load<Bfloat>(in + i));
    avx512_store<Bfloat>(acc + i, r);
  }
  return i;
}

// Scaling: (float)((double)x * factor), as the portable code computes it.
template <bool Bfloat>
HVD_AVX2 inline size_t scale_avx2(uint16_t* buf, size_t n, double factor) {
  const __m256d f = _mm256_set1_pd(factor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = avx2_load<Bfloat>(buf + i);
    __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), f));
    __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)), f));
    __m256 r = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    avx2_store<Bfloat>(buf + i, r);
  }
  return i;
}

template <bool Bfloat>
HVD_AVX512 inline size_t scale_avx512(uint16_t* buf, size_t n, double factor) {
  const __m512d f = _mm512_set1_pd(factor);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 x = avx512_load<Bfloat>(buf + i);
    // Halves moved as 64-bit lanes: AVX-512F alone has those moves (the 32-bit ones need DQ).
    __m256 upper = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
    __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(x)), f));
    __m256 hi = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(upper), f));
    __m512 r = _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
    avx512_store<Bfloat>(buf + i, r);
  }
  return i;
}

#undef HVD_AVX2
#undef HVD_AVX512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // HVD_REDUCE_SIMD_X86

// The leading elements `at` reduces with vector instructions (none below AVX2); the portable
// loop does the rest.
template <bool Bfloat>
inline size_t reduce_16bit(Level at, hvd_reduce_op op, uint16_t* acc, const uint16_t* in,
                           size_t n) {
#ifdef HVD_REDUCE_SIMD_X86
  if (at == Level::kAvx512) return reduce_avx512<Bfloat>(op, acc, in, n);
  if (at == Level::kAvx2) return reduce_avx2<Bfloat>(op, acc, in, n);
#endif
  (void)at, (void)op, (void)acc, (void)in, (void)n;
  return 0;
}

template <bool Bfloat>
inline size_t scale_16bit(Level at, uint16_t* buf, size_t n, double factor) {
#ifdef HVD_REDUCE_SIMD_X86
  if (at == Level::kAvx512) return scale_avx512<Bfloat>(buf, n, factor);
  if (at == Level::kAvx2) return scale_avx2<Bfloat>(buf, n, factor);
#endif
  (void)at, (void)buf, (void)n, (void)factor;
  return 0;
}

}  // namespace simd
}  // namespace hvd

#endif  // HVD_REDUCE_SIMD_HPP_
