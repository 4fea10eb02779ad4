// Negotiation messages and their wire format.
//
// Requests travel from every rank to the coordinator, responses back. The encoding is a compact
// little-endian byte stream; the decoder checks every length against the bytes that remain and
// against fixed bounds, so a corrupt or hostile message yields a clean error, never a crash or an
// unbounded allocation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common.h"

namespace hvdcore {

struct Request {
  int32_t rank = 0;  // rank within the process set
  OpType type = OpType::kAllreduce;
  hvd_dtype dtype = HVD_DTYPE_FLOAT32;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = -1;
  uint32_t device_kind = HVD_DEVICE_CPU;
  double prescale = 1.0;
  double postscale = 1.0;
  std::string name;
  std::vector<int64_t> shape;
  int64_t group_id = -1;  // grouped ops share an id and are executed together
  int32_t group_size = 0;
  bool invalidates_cache = false;  // the cached entry of this name must be dropped on every rank
  std::vector<int32_t> ranks;      // add_process_set: the members; remove_process_set: {id}
  // alltoall: the rows this member sends to each member (even splits written out when none were
  // given), so that the coordinator can tell every member what it receives (Response::tensor_sizes).
  std::vector<int64_t> splits;
  // Non-empty: this member refused the operation when it was submitted, saying why; the
  // coordinator answers it with an error (a refused member of a group still completes the group).
  std::string refusal;
};

struct Response {
  enum class Kind : uint8_t { kOp = 0, kError = 1 };
  Kind kind = Kind::kOp;
  OpType type = OpType::kAllreduce;
  hvd_dtype dtype = HVD_DTYPE_FLOAT32;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = -1;
  uint32_t device_kind = HVD_DEVICE_CPU;
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<std::string> names;            // more than one when fused
  std::vector<std::vector<int64_t>> shapes;  // one per name, so that joined ranks can take part
  std::string error;                         // kError
  int32_t last_joined_rank = -1;             // join
  std::vector<int32_t> ranks;                // add/remove process set
  bool cacheable = false;
  // What every member contributes, so that no member has to ask the others before moving the data
  // (as Horovod's Response::tensor_sizes). allgather: each member's first dimension, in member
  // order (n values); alltoall: the n x n table of splits, row i being what member i sends to each
  // member (member j receives column j). Empty for other ops. Members that joined without the
  // tensor have zeros. Allgathers and alltoalls are never fused: one tensor per response.
  std::vector<int64_t> tensor_sizes;
  // Not on the wire: the members whose data for this cycle's run of a cached op is already in their
  // peers' eager space (negotiation/eager.h), in member order. Empty for most responses.
  std::vector<int32_t> eager_from;
};

struct ResponseList {
  std::vector<int32_t> cache_erase;  // cache slots every rank drops before executing
  std::vector<Response> responses;
  std::string shutdown_error;  // non-empty: every rank stops with this error (stall shutdown)
};

// Bounds applied when decoding; generous for real jobs, small enough to stop a malicious length.
constexpr uint32_t kMaxNameBytes = 1u << 16;
constexpr uint32_t kMaxDims = 64;
constexpr uint32_t kMaxListItems = 1u << 20;
constexpr uint32_t kMaxTensorSizes = 1u << 26;  // an alltoall's n x n splits: up to 8192 members

void EncodeRequests(const std::vector<Request>& requests, std::vector<uint8_t>* out);
Status DecodeRequests(const uint8_t* data, size_t size, std::vector<Request>* out);
void EncodeResponseList(const ResponseList& list, std::vector<uint8_t>* out);
Status DecodeResponseList(const uint8_t* data, size_t size, ResponseList* out);

}  // namespace hvdcore
