// The response cache: what counts as a hit, and which slot a response takes (every rank must number
// its slots alike, so the numbering is part of the contract).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/handle.h"
#include "negotiation/message.h"
#include "negotiation/response_cache.h"

namespace hvdcore {
namespace {

Response Negotiated(const std::string& name, OpType type = OpType::kAllreduce, std::vector<int64_t> shape = {4}) {
  Response r;
  r.type = type;
  r.names = {name};
  r.shapes = {std::move(shape)};
  r.cacheable = true;
  return r;
}

// The entry a caller submits again, described as the response was.
TensorEntry Submitted(const Response& r) {
  TensorEntry e;
  e.name = r.names[0];
  e.type = r.type;
  e.input.dtype = r.dtype;
  e.input.shape = r.shapes[0];
  e.op = r.op;
  e.root = r.root;
  e.prescale = r.prescale;
  e.postscale = r.postscale;
  return e;
}

TEST(ResponseCache, SubmittingTheSameTensorAgainIsAHit) {
  ResponseCache cache(4);
  Response r = Negotiated("t");
  cache.Put(r);
  int32_t slot = -1;
  EXPECT_EQ(cache.Find(Submitted(r), 2, &slot), ResponseCache::Lookup::kHit);
  EXPECT_EQ(slot, cache.SlotOf("t"));
  EXPECT_EQ(cache.Get(slot).names, r.names);
}

TEST(ResponseCache, UnknownNamesMissAndChangedTensorsMismatch) {
  ResponseCache cache(4);
  Response r = Negotiated("t");
  cache.Put(r);
  int32_t slot = -1;
  EXPECT_EQ(cache.Find(Submitted(Negotiated("u")), 2, &slot), ResponseCache::Lookup::kMiss);

  TensorEntry reshaped = Submitted(r);
  reshaped.input.shape = {5};
  EXPECT_EQ(cache.Find(reshaped, 2, &slot), ResponseCache::Lookup::kMismatch);
  TensorEntry retyped = Submitted(r);
  retyped.input.dtype = HVD_DTYPE_FLOAT64;
  EXPECT_EQ(cache.Find(retyped, 2, &slot), ResponseCache::Lookup::kMismatch);
  TensorEntry rescaled = Submitted(r);
  rescaled.prescale = 2.0;
  EXPECT_EQ(cache.Find(rescaled, 2, &slot), ResponseCache::Lookup::kMismatch);
}

// An allgather's or alltoall's first dimension and splits may change between calls: the entry
// still hits (a member sends its new sizes with its bit, controller.cc), but SizesMatch tells
// whether the cached response holds this member's sizes as they are now.
TEST(ResponseCache, AllgatherHitsWhateverItsFirstDimensionAndTellsWhetherItsSizesChanged) {
  ResponseCache cache(4);
  Response r = Negotiated("g", OpType::kAllgather, {3, 8});
  r.tensor_sizes = {3, 5};  // member 0 has 3 rows, member 1 five
  cache.Put(r);
  TensorEntry mine = Submitted(r);
  int32_t slot = -1;
  EXPECT_EQ(cache.Find(mine, 2, &slot), ResponseCache::Lookup::kHit);
  EXPECT_TRUE(SizesMatch(mine, cache.Get(slot), 2, 0));
  EXPECT_FALSE(SizesMatch(mine, cache.Get(slot), 2, 1));  // as member 1 it has 3 rows, not 5

  TensorEntry longer = Submitted(r);
  longer.input.shape = {30, 8};
  EXPECT_EQ(cache.Find(longer, 2, &slot), ResponseCache::Lookup::kHit);
  EXPECT_FALSE(SizesMatch(longer, cache.Get(slot), 2, 0));
  EXPECT_EQ(MemberSizes(longer, 2), std::vector<int64_t>{30});

  // The new sizes, once every member has seen them, are written into the cached response.
  const int64_t thirty = 30;
  cache.SetMemberSizes(slot, 0, 2, &thirty);
  EXPECT_EQ(cache.Get(slot).tensor_sizes, (std::vector<int64_t>{30, 5}));
  EXPECT_TRUE(SizesMatch(longer, cache.Get(slot), 2, 0));

  longer.input.shape = {3, 9};
  EXPECT_EQ(cache.Find(longer, 2, &slot), ResponseCache::Lookup::kMismatch);
}

TEST(ResponseCache, AlltoallSizesAreTheSplitsOfEachMember) {
  ResponseCache cache(4);
  Response r = Negotiated("a2a", OpType::kAlltoall, {4, 2});
  r.tensor_sizes = {1, 3, 2, 2};  // member 0 sends 1 row to 0 and 3 to 1; member 1 sends 2 and 2
  cache.Put(r);
  TensorEntry e = Submitted(r);
  e.splits = {1, 3};
  int32_t slot = -1;
  ASSERT_EQ(cache.Find(e, 2, &slot), ResponseCache::Lookup::kHit);
  EXPECT_TRUE(SizesMatch(e, cache.Get(slot), 2, 0));
  EXPECT_FALSE(SizesMatch(e, cache.Get(slot), 2, 1));
  e.splits = {2, 2};
  EXPECT_TRUE(SizesMatch(e, cache.Get(slot), 2, 1));
  e.splits = {};  // no splits: even ones, written out
  EXPECT_EQ(MemberSizes(e, 2), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(SizesMatch(e, cache.Get(slot), 2, 1));
  EXPECT_FALSE(SizesMatch(e, cache.Get(slot), 2, 0));

  const int64_t row[2] = {4, 0};
  cache.SetMemberSizes(slot, 1, 2, row);
  EXPECT_EQ(cache.Get(slot).tensor_sizes, (std::vector<int64_t>{1, 3, 4, 0}));
  cache.SetMemberSizes(slot, 2, 2, row);  // no such member: nothing changes
  EXPECT_EQ(cache.Get(slot).tensor_sizes, (std::vector<int64_t>{1, 3, 4, 0}));
}

// A cached response without a size for every member of the set (a set of another size) is not a
// hit: the executor could not move the data by it.
TEST(ResponseCache, SizesForAnotherSetSizeMismatch) {
  ResponseCache cache(4);
  Response r = Negotiated("g", OpType::kAllgather, {3, 8});
  r.tensor_sizes = {3, 5};
  cache.Put(r);
  int32_t slot = -1;
  EXPECT_EQ(cache.Find(Submitted(r), 3, &slot), ResponseCache::Lookup::kMismatch);
}

TEST(ResponseCache, SlotsAreNumberedInTheOrderOfPuts) {
  ResponseCache cache(4);
  for (const char* name : {"a", "b", "c"}) cache.Put(Negotiated(name));
  EXPECT_EQ(cache.SlotOf("a"), 0);
  EXPECT_EQ(cache.SlotOf("b"), 1);
  EXPECT_EQ(cache.SlotOf("c"), 2);
  EXPECT_EQ(cache.SlotOf("d"), -1);
  EXPECT_EQ(cache.num_slots(), 3);

  cache.Put(Negotiated("b", OpType::kAllreduce, {9}));  // a new response for a known name keeps its slot
  EXPECT_EQ(cache.SlotOf("b"), 1);
  EXPECT_EQ(cache.Get(1).shapes[0], std::vector<int64_t>{9});
}

TEST(ResponseCache, TheLeastRecentlyUsedIsEvictedWhenFull) {
  ResponseCache cache(2);
  cache.Put(Negotiated("a"));
  cache.Put(Negotiated("b"));
  cache.Touch(cache.SlotOf("a"));
  cache.Put(Negotiated("c"));
  EXPECT_EQ(cache.SlotOf("b"), -1);
  EXPECT_EQ(cache.SlotOf("c"), 1);  // b's slot
  EXPECT_EQ(cache.SlotOf("a"), 0);
  EXPECT_EQ(cache.num_slots(), 2);
}

TEST(ResponseCache, AnErasedSlotIsReusedBeforeTheCacheGrows) {
  ResponseCache cache(4);
  cache.Put(Negotiated("a"));
  cache.Put(Negotiated("b"));
  cache.Erase(cache.SlotOf("a"));
  EXPECT_EQ(cache.SlotOf("a"), -1);
  cache.Put(Negotiated("c"));
  EXPECT_EQ(cache.SlotOf("c"), 0);
  EXPECT_EQ(cache.num_slots(), 2);

  cache.Erase(-1);  // out of range or unused: nothing happens
  cache.Erase(7);
  cache.Erase(cache.SlotOf("c"));
  cache.Erase(0);
  EXPECT_EQ(cache.SlotOf("b"), 1);
}

TEST(ResponseCache, FusedResponsesAndADisabledCacheKeepNothing) {
  ResponseCache cache(4);
  Response fused = Negotiated("a");
  fused.names = {"a", "b"};
  fused.shapes = {{4}, {4}};
  cache.Put(fused);
  EXPECT_EQ(cache.num_slots(), 0);

  ResponseCache disabled(0);
  EXPECT_FALSE(disabled.enabled());
  disabled.Put(Negotiated("a"));
  EXPECT_EQ(disabled.num_slots(), 0);
  EXPECT_EQ(disabled.SlotOf("a"), -1);
}

}  // namespace
}  // namespace hvdcore
