// float16 and bfloat16 reductions and scaling with vector instructions (horovod/hvd_reduce_simd.hpp)
// equal the portable code bit for bit: every 16-bit pattern (zeros, subnormals, infinities, NaNs
// with payloads) against varied partners, every op, odd lengths and unaligned starts, at each level
// this CPU has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "horovod/hvd_reduce.hpp"

namespace {

using hvd::simd::Level;

std::vector<Level> LevelsHere() {
  std::vector<Level> levels;
  if ((int)hvd::simd::detect() >= (int)Level::kAvx2) levels.push_back(Level::kAvx2);
  if (hvd::simd::detect() == Level::kAvx512) levels.push_back(Level::kAvx512);
  return levels;
}

// Every 16-bit pattern once, then random ones, `n` in all.
std::vector<uint16_t> Patterns(size_t n, uint32_t seed) {
  std::vector<uint16_t> v(n);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) v[i] = i < 65536 ? (uint16_t)i : (uint16_t)rng();
  return v;
}

// The portable reduction, as hvd_reduce.hpp's fallback computes it.
template <bool Bfloat>
void Portable(hvd_reduce_op op, uint16_t* acc, const uint16_t* in, size_t n) {
  if constexpr (Bfloat) {
    hvd::detail::reduce_16bit<hvd::bfloat_to_float, hvd::float_to_bfloat>(op, acc, in, n);
  } else {
    hvd::detail::reduce_16bit<hvd::half_to_float, hvd::float_to_half>(op, acc, in, n);
  }
}

// The vector path at `level`, the portable loop doing the tail: what reduce_into does.
template <bool Bfloat>
void AtLevel(Level level, hvd_reduce_op op, uint16_t* acc, const uint16_t* in, size_t n) {
  const size_t done = hvd::simd::reduce_16bit<Bfloat>(level, op, acc, in, n);
  Portable<Bfloat>(op, acc + done, in + done, n - done);
}

template <bool Bfloat>
void CheckReductions(Level level) {
  const char* ops[] = {"sum", "min", "max", "product"};
  for (int op = HVD_REDUCE_SUM; op <= HVD_REDUCE_PRODUCT; ++op) {
    // Every pattern against three sets of partners; then odd lengths from unaligned starts.
    for (uint32_t seed : {1u, 2u, 3u}) {
      const size_t n = 65536 + 37;
      std::vector<uint16_t> acc = Patterns(n, seed), in = Patterns(n, seed + 10);
      std::mt19937 shuffle(seed);
      std::shuffle(in.begin(), in.end(), shuffle);
      std::vector<uint16_t> expected = acc;
      Portable<Bfloat>((hvd_reduce_op)op, expected.data(), in.data(), n);
      for (size_t start : {0u, 1u, 3u}) {
        for (size_t len : {n - start, (size_t)0, (size_t)7, (size_t)8, (size_t)15, (size_t)17, (size_t)1001}) {
          std::vector<uint16_t> got = acc;
          AtLevel<Bfloat>(level, (hvd_reduce_op)op, got.data() + start, in.data() + start, len);
          for (size_t i = 0; i < n; ++i) {
            const uint16_t want = i >= start && i < start + len ? expected[i] : acc[i];
            ASSERT_EQ(got[i], want) << ops[op] << " of " << std::hex << acc[i] << " and " << in[i] << " at " << std::dec
                                    << i << " (start " << start << ", length " << len << ", level " << (int)level
                                    << ")";
          }
        }
      }
    }
  }
}

template <bool Bfloat>
void CheckScaling(Level level) {
  for (double factor : {0.5, 1.0 / 3.0, 3.0, 1e-3, 1e5, -2.0, 1.0 / 65536.0}) {
    const size_t n = 65536 + 21;
    std::vector<uint16_t> expected = Patterns(n, 7);
    std::vector<uint16_t> got = expected;
    for (size_t i = 0; i < n; ++i) {
      expected[i] = Bfloat ? hvd::float_to_bfloat((float)(hvd::bfloat_to_float(expected[i]) * factor))
                           : hvd::float_to_half((float)(hvd::half_to_float(expected[i]) * factor));
    }
    const size_t done = hvd::simd::scale_16bit<Bfloat>(level, got.data() + 1, n - 1, factor);
    ASSERT_GT(done, 0u);
    for (size_t i = 1 + done; i < n; ++i) {  // the tail, portably, as scale() does
      got[i] = Bfloat ? hvd::float_to_bfloat((float)(hvd::bfloat_to_float(got[i]) * factor))
                      : hvd::float_to_half((float)(hvd::half_to_float(got[i]) * factor));
    }
    for (size_t i = 1; i < n; ++i) {
      ASSERT_EQ(got[i], expected[i]) << "x" << factor << " of pattern " << std::hex << Patterns(n, 7)[i] << " at "
                                     << std::dec << i << " (level " << (int)level << ")";
    }
  }
}

TEST(ReduceSimdTest, Float16ReductionsEqualThePortableCode) {
  for (Level level : LevelsHere()) CheckReductions<false>(level);
}

TEST(ReduceSimdTest, Bfloat16ReductionsEqualThePortableCode) {
  for (Level level : LevelsHere()) CheckReductions<true>(level);
}

TEST(ReduceSimdTest, ScalingEqualsThePortableCode) {
  for (Level level : LevelsHere()) {
    CheckScaling<false>(level);
    CheckScaling<true>(level);
  }
}

TEST(ReduceSimdTest, PortableLevelDoesNothingAndCapsApply) {
  uint16_t a[16] = {}, b[16] = {};
  EXPECT_EQ(hvd::simd::reduce_16bit<false>(Level::kPortable, HVD_REDUCE_SUM, a, b, 16), 0u);
  EXPECT_EQ(hvd::simd::chosen("portable", Level::kAvx512), Level::kPortable);
  EXPECT_EQ(hvd::simd::chosen("avx2", Level::kAvx512), Level::kAvx2);
  EXPECT_EQ(hvd::simd::chosen("avx512", Level::kAvx2), Level::kAvx2);  // never above what the CPU has
  EXPECT_EQ(hvd::simd::chosen(nullptr, Level::kAvx2), Level::kAvx2);
}

}  // namespace
