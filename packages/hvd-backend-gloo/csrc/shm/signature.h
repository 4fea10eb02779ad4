// What each member says it is doing when a collective through shared memory starts.
//
// Every member publishes a Signature with its collective's first step and compares its peers'
// with its own before it reads any data: members called with different collectives or arguments
// then fail alike, naming what each was called with, instead of exchanging the wrong bytes (or
// waiting for steps that never come). hvd's engine negotiates every collective before it calls the
// backend; this guards callers of the C ABI that do not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "horovod/hvd_backend.h"

namespace hvd_shm {

enum class Collective : uint32_t { kAllreduce = 1, kAllgatherv, kBroadcast, kReducescatter, kAlltoallv, kBarrier };

struct Signature {
  Collective collective;
  int32_t root = -1;   // broadcast
  int32_t dtype = -1;  // reductions: an hvd_dtype; -1 where only the element size matters
  int32_t reduce = -1;  // reductions: an hvd_reduce_op
  uint64_t bytes = 0;   // the payload as this member sees it (its total for the v-collectives)
  uint64_t detail = 0;  // what else every member must pass alike: counts, the element size, the scale

  bool operator==(const Signature& o) const {
    return collective == o.collective && root == o.root && dtype == o.dtype && reduce == o.reduce && bytes == o.bytes &&
           detail == o.detail;
  }
  bool operator!=(const Signature& o) const { return !(*this == o); }
};

// For `detail`: a digest of the counts every member passes (FNV-1a), mixed with `extra`.
uint64_t CountsDigest(const size_t* counts, size_t n, uint64_t extra);
// The bits of a scale factor, for `detail`.
uint64_t ScaleBits(double factor);

// "allreduce of 64 bytes of float32 (sum)", "broadcast of 16 bytes from root 1", ...
std::string DescribeSignature(const Signature& s);

}  // namespace hvd_shm
