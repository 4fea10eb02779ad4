// The negotiation wire format: messages survive the round trip, and the decoders, given corrupt or
// hostile bytes, fail with a clean error: they never crash, read out of bounds (which the address
// sanitizer build sees), or allocate more than a small multiple of the message they were given.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "negotiation/message.h"

// Every allocation of this test program comes through here, so that a test can count what decoding
// one message allocates. Larger requests than any test needs are refused rather than served, so that
// a decoder trusting a forged length fails the test instead of taking the machine's memory.
namespace {
thread_local bool g_counting = false;
thread_local size_t g_counted_bytes = 0;
constexpr size_t kRefusedAllocation = size_t{256} << 20;
}  // namespace

void* operator new(size_t bytes) {
  if (g_counting) {
    g_counted_bytes += bytes;
    if (bytes >= kRefusedAllocation) throw std::bad_alloc();
  }
  if (void* p = std::malloc(bytes ? bytes : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace hvdcore {
namespace {

using Bytes = std::vector<uint8_t>;

// What decoding may allocate in all: each decoded item takes at least 8 bytes of the message and
// becomes at most a few dozen bytes of objects (twice that while a vector grows).
size_t Allowance(const Bytes& message) { return 64 * message.size() + 4096; }

template <typename Decode>
size_t BytesAllocatedBy(Decode decode) {
  g_counted_bytes = 0;
  g_counting = true;
  decode();
  g_counting = false;
  return g_counted_bytes;
}

// Decodes `message` as a request list and as a response list: each either succeeds or fails with
// the decoder's own error, within the allowance.
void ExpectCleanDecoding(const Bytes& message) {
  Status requests_status, responses_status;
  std::vector<Request> requests;
  ResponseList responses;
  size_t allocated =
      BytesAllocatedBy([&] { requests_status = DecodeRequests(message.data(), message.size(), &requests); });
  EXPECT_LE(allocated, Allowance(message)) << "request list of " << message.size() << " bytes";
  allocated =
      BytesAllocatedBy([&] { responses_status = DecodeResponseList(message.data(), message.size(), &responses); });
  EXPECT_LE(allocated, Allowance(message)) << "response list of " << message.size() << " bytes";
  for (const Status* s : {&requests_status, &responses_status}) {
    if (s->ok()) continue;
    EXPECT_EQ(s->code(), StatusCode::kAborted);
    EXPECT_EQ(s->message().rfind("malformed negotiation message: ", 0), 0u) << s->message();
  }
  // A failed decoding leaves nothing half-decoded behind.
  if (!requests_status.ok()) {
    EXPECT_TRUE(requests.empty());
  }
  if (!responses_status.ok()) {
    EXPECT_TRUE(responses.responses.empty());
  }
}

Request SampleRequest() {
  Request r;
  r.rank = 3;
  r.type = OpType::kAllreduce;
  r.dtype = HVD_DTYPE_FLOAT32;
  r.op = ReduceOp::kAverage;
  r.root = -1;
  r.prescale = 0.5;
  r.postscale = 2.0;
  r.name = "layer1.weight";
  r.shape = {64, 3, 3};
  r.group_id = 12;
  r.group_size = 2;
  r.invalidates_cache = true;
  r.ranks = {0, 2};
  r.splits = {5, 0, 7};
  r.refusal = "refused: a scalar";
  return r;
}

ResponseList SampleResponses() {
  ResponseList list;
  list.cache_erase = {4, 1};
  list.shutdown_error = "stalled";
  Response fused;
  fused.type = OpType::kAllreduce;
  fused.dtype = HVD_DTYPE_BFLOAT16;
  fused.op = ReduceOp::kSum;
  fused.prescale = 0.25;
  fused.names = {"a", "bb"};
  fused.shapes = {{2, 2}, {7}};
  fused.cacheable = true;
  Response error;
  error.kind = Response::Kind::kError;
  error.type = OpType::kBroadcast;
  error.root = 1;
  error.names = {"c"};
  error.shapes = {{}};
  error.error = "Mismatched root ranks";
  error.last_joined_rank = 2;
  error.ranks = {5};
  Response gather;
  gather.type = OpType::kAllgather;
  gather.names = {"g"};
  gather.shapes = {{3, 4}};
  gather.tensor_sizes = {3, 0, 9};
  gather.cacheable = true;
  Response a2a;
  a2a.type = OpType::kAlltoall;
  a2a.names = {"a2a"};
  a2a.shapes = {{4}};
  a2a.tensor_sizes = {1, 3, 2, 2};
  list.responses = {fused, error, gather, a2a};
  return list;
}

Bytes Encoded(const std::vector<Request>& requests) {
  Bytes out;
  EncodeRequests(requests, &out);
  return out;
}

Bytes Encoded(const ResponseList& list) {
  Bytes out;
  EncodeResponseList(list, &out);
  return out;
}

// The first four bytes of a message, which say what it holds.
Bytes MagicOf(const Bytes& message) { return Bytes(message.begin(), message.begin() + 4); }

TEST(WireFormat, RequestsRoundTrip) {
  Request second = SampleRequest();
  second.type = OpType::kAlltoall;
  second.name = "";
  second.shape = {};
  second.ranks = {};
  second.splits = {};
  Bytes message = Encoded({SampleRequest(), second});
  std::vector<Request> decoded;
  ASSERT_TRUE(DecodeRequests(message.data(), message.size(), &decoded).ok());
  ASSERT_EQ(decoded.size(), 2u);
  const Request& r = decoded[0];
  Request want = SampleRequest();
  EXPECT_EQ(r.rank, want.rank);
  EXPECT_EQ(r.type, want.type);
  EXPECT_EQ(r.dtype, want.dtype);
  EXPECT_EQ(r.op, want.op);
  EXPECT_EQ(r.root, want.root);
  EXPECT_EQ(r.device_kind, want.device_kind);
  EXPECT_EQ(r.prescale, want.prescale);
  EXPECT_EQ(r.postscale, want.postscale);
  EXPECT_EQ(r.name, want.name);
  EXPECT_EQ(r.shape, want.shape);
  EXPECT_EQ(r.group_id, want.group_id);
  EXPECT_EQ(r.group_size, want.group_size);
  EXPECT_EQ(r.invalidates_cache, want.invalidates_cache);
  EXPECT_EQ(r.ranks, want.ranks);
  EXPECT_EQ(r.splits, want.splits);
  EXPECT_EQ(r.refusal, want.refusal);
  EXPECT_EQ(decoded[1].type, OpType::kAlltoall);
  EXPECT_EQ(decoded[1].name, "");
  EXPECT_TRUE(decoded[1].splits.empty());
}

TEST(WireFormat, ResponsesRoundTrip) {
  ResponseList want = SampleResponses();
  Bytes message = Encoded(want);
  ResponseList got;
  ASSERT_TRUE(DecodeResponseList(message.data(), message.size(), &got).ok());
  EXPECT_EQ(got.cache_erase, want.cache_erase);
  EXPECT_EQ(got.shutdown_error, want.shutdown_error);
  ASSERT_EQ(got.responses.size(), want.responses.size());
  for (size_t i = 0; i < want.responses.size(); ++i) {
    const Response& g = got.responses[i];
    const Response& w = want.responses[i];
    EXPECT_EQ(g.kind, w.kind);
    EXPECT_EQ(g.type, w.type);
    EXPECT_EQ(g.dtype, w.dtype);
    EXPECT_EQ(g.op, w.op);
    EXPECT_EQ(g.root, w.root);
    EXPECT_EQ(g.prescale, w.prescale);
    EXPECT_EQ(g.postscale, w.postscale);
    EXPECT_EQ(g.names, w.names);
    EXPECT_EQ(g.shapes, w.shapes);
    EXPECT_EQ(g.error, w.error);
    EXPECT_EQ(g.last_joined_rank, w.last_joined_rank);
    EXPECT_EQ(g.ranks, w.ranks);
    EXPECT_EQ(g.cacheable, w.cacheable);
    EXPECT_EQ(g.tensor_sizes, w.tensor_sizes);
  }
}

// Sizes are counts of rows: a negative one is a corrupt message, refused like any other.
TEST(WireFormat, NegativeSplitsAndSizesAreRefused) {
  Request request = SampleRequest();
  request.splits = {2, -1};
  Bytes message = Encoded({request});
  std::vector<Request> requests;
  Status s = DecodeRequests(message.data(), message.size(), &requests);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("negative split"), std::string::npos) << s.message();

  ResponseList list = SampleResponses();
  list.responses[2].tensor_sizes = {3, -4, 9};
  message = Encoded(list);
  ResponseList responses;
  s = DecodeResponseList(message.data(), message.size(), &responses);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("negative size"), std::string::npos) << s.message();
}

// The magic number names the layout's version: messages of the layout before (with no splits and
// no sizes) are refused with an error that says so, not misread.
TEST(WireFormat, MessagesOfAnotherVersionAreRefused) {
  for (uint32_t old_magic : {0x48565251u, 0x48565253u}) {  // "HVRQ", "HVRS": version 1
    Bytes message = Encoded({SampleRequest()});
    std::memcpy(message.data(), &old_magic, 4);
    std::vector<Request> requests;
    Status s = DecodeRequests(message.data(), message.size(), &requests);
    EXPECT_NE(s.message().find("not a request list of this version"), std::string::npos) << s.message();
    message = Encoded(SampleResponses());
    std::memcpy(message.data(), &old_magic, 4);
    ResponseList responses;
    s = DecodeResponseList(message.data(), message.size(), &responses);
    EXPECT_NE(s.message().find("not a response list of this version"), std::string::npos) << s.message();
  }
}

TEST(WireFormat, EveryTruncationIsRefused) {
  const Bytes requests = Encoded({SampleRequest(), SampleRequest()});
  for (size_t cut = 0; cut < requests.size(); ++cut) {
    Bytes prefix(requests.begin(), requests.begin() + cut);
    std::vector<Request> decoded;
    EXPECT_FALSE(DecodeRequests(prefix.data(), prefix.size(), &decoded).ok()) << "cut at " << cut;
    ExpectCleanDecoding(prefix);
  }
  const Bytes responses = Encoded(SampleResponses());
  for (size_t cut = 0; cut < responses.size(); ++cut) {
    Bytes prefix(responses.begin(), responses.begin() + cut);
    ResponseList decoded;
    EXPECT_FALSE(DecodeResponseList(prefix.data(), prefix.size(), &decoded).ok()) << "cut at " << cut;
    ExpectCleanDecoding(prefix);
  }
}

TEST(WireFormat, TrailingBytesAreRefused) {
  Bytes message = Encoded({SampleRequest()});
  message.push_back(0);
  std::vector<Request> decoded;
  Status s = DecodeRequests(message.data(), message.size(), &decoded);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("trailing bytes"), std::string::npos) << s.message();
}

// Random bytes, and random bytes behind each list's magic number so that decoding goes past it.
TEST(WireFormat, RandomBytesDecodeCleanly) {
  std::mt19937 random(20240601);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<size_t> length(0, 512);
  const Bytes request_magic = MagicOf(Encoded(std::vector<Request>{}));
  const Bytes response_magic = MagicOf(Encoded(ResponseList{}));
  for (int i = 0; i < 30000; ++i) {
    Bytes message = i % 3 == 0 ? Bytes() : i % 3 == 1 ? request_magic : response_magic;
    for (size_t n = length(random); n > 0; --n) message.push_back((uint8_t)byte(random));
    ExpectCleanDecoding(message);
    if (HasFailure()) FAIL() << "case " << i;
  }
}

// Valid messages with a few bytes overwritten and the end cut off.
TEST(WireFormat, MutatedMessagesDecodeCleanly) {
  std::mt19937 random(7);
  std::uniform_int_distribution<int> byte(0, 255), flips(0, 8);
  const std::vector<Bytes> valid = {Encoded({SampleRequest()}), Encoded({SampleRequest(), SampleRequest()}),
                                    Encoded(SampleResponses())};
  for (int i = 0; i < 30000; ++i) {
    Bytes message = valid[i % valid.size()];
    std::uniform_int_distribution<size_t> at(0, message.size() - 1);
    for (int n = flips(random); n > 0; --n) message[at(random)] = (uint8_t)byte(random);
    message.resize(std::uniform_int_distribution<size_t>(0, message.size())(random));
    ExpectCleanDecoding(message);
    if (HasFailure()) FAIL() << "case " << i;
  }
}

// Lengths and counts near the limits of their fields, in a message far too short to hold them.
TEST(WireFormat, ForgedLengthsAreRefusedWithoutAllocating) {
  const Bytes valid = Encoded({SampleRequest()});
  auto with_u32_at = [&](size_t offset, uint32_t value) {
    Bytes message = valid;
    std::memcpy(message.data() + offset, &value, sizeof(value));
    return message;
  };
  // magic, count, rank, 4 one-byte fields, root, device, prescale, postscale: then the name's length
  const size_t count_at = 4, name_length_at = 4 + 4 + 4 + 4 + 4 + 4 + 8 + 8;
  const size_t shape_count_at = name_length_at + 4 + SampleRequest().name.size();
  // after the shape's dimensions, the group's id and size
  const size_t ranks_count_at = shape_count_at + 4 + 8 * SampleRequest().shape.size() + 8 + 4;
  const size_t splits_count_at = ranks_count_at + 4 + 4 * SampleRequest().ranks.size();
  const size_t refusal_length_at = splits_count_at + 4 + 8 * SampleRequest().splits.size();
  ASSERT_EQ(refusal_length_at + 4 + SampleRequest().refusal.size(), valid.size());
  for (uint32_t forged : {0xFFFFFFFFu, 0xFFFFFFF0u, 0x80000000u, 1000000u, kMaxListItems, kMaxNameBytes + 1}) {
    for (size_t at : {count_at, name_length_at, shape_count_at, ranks_count_at, splits_count_at, refusal_length_at}) {
      Bytes message = with_u32_at(at, forged);
      ExpectCleanDecoding(message);
      std::vector<Request> decoded;
      EXPECT_FALSE(DecodeRequests(message.data(), message.size(), &decoded).ok()) << forged << " at " << at;
    }
  }
}

// The same for the count of a response's sizes, whose bound is larger than the other lists'.
TEST(WireFormat, ForgedSizeCountsAreRefusedWithoutAllocating) {
  ResponseList list;
  list.responses = {SampleResponses().responses[2]};
  const Bytes valid = Encoded(list);
  const size_t sizes_count_at = valid.size() - 4 - 8 * list.responses[0].tensor_sizes.size();
  for (uint32_t forged : {0xFFFFFFFFu, 0x80000000u, kMaxTensorSizes, kMaxTensorSizes - 1, 1000000u, 4u}) {
    Bytes message = valid;
    std::memcpy(message.data() + sizes_count_at, &forged, sizeof(forged));
    ExpectCleanDecoding(message);
    ResponseList decoded;
    EXPECT_FALSE(DecodeResponseList(message.data(), message.size(), &decoded).ok()) << forged;
  }
}

}  // namespace
}  // namespace hvdcore
