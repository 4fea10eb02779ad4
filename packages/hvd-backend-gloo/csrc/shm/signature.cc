// Signatures of collectives through shared memory (signature.h).
#include "shm/signature.h"

#include <cstring>

#include "horovod/hvd_reduce.hpp"

namespace hvd_shm {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull, kFnvPrime = 1099511628211ull;

uint64_t Mix(uint64_t hash, uint64_t value) {
  for (int i = 0; i < 8; ++i) hash = (hash ^ ((value >> (8 * i)) & 0xff)) * kFnvPrime;
  return hash;
}

const char* ReduceName(int32_t op) {
  switch (op) {
    case HVD_REDUCE_SUM: return "sum";
    case HVD_REDUCE_MIN: return "min";
    case HVD_REDUCE_MAX: return "max";
    case HVD_REDUCE_PRODUCT: return "product";
  }
  return "unknown op";
}

}  // namespace

uint64_t CountsDigest(const size_t* counts, size_t n, uint64_t extra) {
  uint64_t hash = Mix(kFnvOffset, extra);
  for (size_t i = 0; i < n; ++i) hash = Mix(hash, counts[i]);
  return hash;
}

uint64_t ScaleBits(double factor) {
  uint64_t bits;
  std::memcpy(&bits, &factor, sizeof bits);
  return bits;
}

std::string DescribeSignature(const Signature& s) {
  const std::string bytes = std::to_string(s.bytes) + " bytes";
  const std::string of_dtype = s.dtype >= 0 ? std::string(" of ") + hvd::dtype_name((hvd_dtype)s.dtype) : "";
  switch (s.collective) {
    case Collective::kAllreduce: {
      double scale;  // the allreduce's detail is its scale's bits (ScaleBits)
      std::memcpy(&scale, &s.detail, sizeof scale);
      const std::string scaled = scale != 1.0 ? ", results scaled by " + std::to_string(scale) : "";
      return "allreduce of " + bytes + of_dtype + " (" + ReduceName(s.reduce) + scaled + ")";
    }
    case Collective::kAllgatherv: return "allgather of " + bytes + " in all";
    case Collective::kBroadcast: return "broadcast of " + bytes + " from root " + std::to_string(s.root);
    case Collective::kReducescatter: return "reducescatter of " + bytes + of_dtype + " (" + ReduceName(s.reduce) + ")";
    case Collective::kAlltoallv: return "alltoall";
    case Collective::kBarrier: return "barrier";
  }
  return "an unknown collective";
}

}  // namespace hvd_shm
