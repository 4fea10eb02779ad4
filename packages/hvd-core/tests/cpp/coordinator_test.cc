// The coordinator of a process set: when a tensor is ready, in which order responses go out, and
// how disagreements between members become errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "negotiation/coordinator.h"
#include "negotiation/response_cache.h"

namespace hvdcore {
namespace {

Request Allreduce(int32_t rank, const std::string& name, std::vector<int64_t> shape = {4}) {
  Request r;
  r.rank = rank;
  r.type = OpType::kAllreduce;
  r.name = name;
  r.shape = std::move(shape);
  return r;
}

Request Join(int32_t rank) {
  Request r;
  r.rank = rank;
  r.type = OpType::kJoin;
  r.name = "join";
  return r;
}

// A coordinator of `size` members, fed one member's requests at a time.
class CoordinatorTest : public ::testing::Test {
 protected:
  void Start(int32_t size) { coordinator_ = std::make_unique<Coordinator>(size); }
  void Add(std::vector<Request> requests, int64_t now_us = 0) { coordinator_->Add(requests, now_us, cache_, &out_); }
  // The responses collected now (and forgotten by the next call).
  std::vector<Response> Collect() {
    out_ = ResponseList();
    coordinator_->Collect(&out_);
    return out_.responses;
  }
  // The error of the one response collected now, or a failure when there is not exactly one error.
  std::string CollectError() {
    std::vector<Response> ready = Collect();
    if (ready.size() != 1 || ready[0].kind != Response::Kind::kError) {
      ADD_FAILURE() << "expected one error response, got " << ready.size() << " responses";
      return "";
    }
    return ready[0].error;
  }
  // Collects one error response, which must say `words`.
  void ExpectErrorSaying(const std::string& words) {
    std::string error = CollectError();
    EXPECT_NE(error.find(words), std::string::npos) << error;
  }
  static std::vector<std::string> Names(const std::vector<Response>& responses) {
    std::vector<std::string> names;
    for (const Response& r : responses) names.push_back(r.names.at(0));
    return names;
  }

  std::unique_ptr<Coordinator> coordinator_;
  ResponseCache cache_{16};
  ResponseList out_;
};

TEST_F(CoordinatorTest, TensorIsReadyOnceEveryMemberSubmittedIt) {
  Start(3);
  Add({Allreduce(0, "t")});
  Add({Allreduce(2, "t")});
  EXPECT_TRUE(Collect().empty());
  EXPECT_FALSE(coordinator_->empty());

  Add({Allreduce(1, "t")});
  std::vector<Response> ready = Collect();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kOp);
  EXPECT_EQ(ready[0].names, std::vector<std::string>{"t"});
  EXPECT_EQ(ready[0].shapes, std::vector<std::vector<int64_t>>{{4}});
  EXPECT_TRUE(ready[0].cacheable);
  EXPECT_TRUE(coordinator_->empty());
}

TEST_F(CoordinatorTest, ResponsesFollowTheOrderTensorsFirstArrived) {
  Start(2);
  Add({Allreduce(0, "c"), Allreduce(0, "a"), Allreduce(0, "b")});
  Add({Allreduce(1, "b"), Allreduce(1, "a"), Allreduce(1, "c")});
  EXPECT_EQ(Names(Collect()), (std::vector<std::string>{"c", "a", "b"}));
}

TEST_F(CoordinatorTest, ResubmittingBeforeTheOthersCountsOnce) {
  Start(2);
  Add({Allreduce(0, "t")});
  Add({Allreduce(0, "t")});
  EXPECT_TRUE(Collect().empty());
}

TEST_F(CoordinatorTest, RequestsFromRanksOutsideTheSetAreIgnored) {
  Start(2);
  Add({Allreduce(-1, "t"), Allreduce(2, "t")});
  EXPECT_TRUE(coordinator_->empty());
}

TEST_F(CoordinatorTest, MismatchedShapesBecomeAnErrorNamingEachRank) {
  Start(3);
  Add({Allreduce(0, "t", {2, 3})});
  Add({Allreduce(1, "t", {4})});
  Add({Allreduce(2, "t", {4})});
  EXPECT_EQ(CollectError(), "Mismatched shapes for allreduce tensor 't': rank 0 has [2, 3]; ranks [1, 2] have [4].");
}

// A group's member refused at submission on one rank still arrives (as a refusal): the group is
// released, the refused member as an error naming that rank, the other as an operation.
TEST_F(CoordinatorTest, ARefusedGroupMemberReleasesItsGroup) {
  Start(2);
  auto member = [](int32_t rank, const std::string& name, std::string refusal) {
    Request r = Allreduce(rank, name);
    r.group_id = 9;
    r.group_size = 2;
    r.refusal = std::move(refusal);
    return r;
  };
  Add({member(0, "g.0", ""), member(0, "g.1", "")});
  Add({member(1, "g.0", "")});
  EXPECT_TRUE(Collect().empty());  // the group waits for its second member
  Add({member(1, "g.1", "allreduce of tensor 'g.1': unknown dtype")});
  std::vector<Response> ready = Collect();
  ASSERT_EQ(ready.size(), 2u);
  // The error first: every rank completes it before the rest wakes a caller who reuses the names.
  EXPECT_EQ(ready[0].kind, Response::Kind::kError);
  EXPECT_EQ(ready[0].error, "refused on rank 1: allreduce of tensor 'g.1': unknown dtype");
  EXPECT_EQ(ready[1].kind, Response::Kind::kOp);
}

TEST_F(CoordinatorTest, MismatchedOperationsAreReportedBeforeAnythingElse) {
  Start(2);
  Request gather = Allreduce(1, "t", {9});
  gather.type = OpType::kAllgather;
  Add({Allreduce(0, "t")});
  Add({gather});
  ExpectErrorSaying("Mismatched collective operations");
}

TEST_F(CoordinatorTest, MismatchedScaleFactorsAreAnError) {
  Start(2);
  Request scaled = Allreduce(1, "t");
  scaled.postscale = 0.5;
  Add({Allreduce(0, "t")});
  Add({scaled});
  ExpectErrorSaying("Mismatched postscale factors");
}

TEST_F(CoordinatorTest, AllgatherMayDifferInTheFirstDimensionOnly) {
  Start(2);
  Request a = Allreduce(0, "g", {2, 5});
  Request b = Allreduce(1, "g", {7, 5});
  a.type = b.type = OpType::kAllgather;
  Add({a});
  Add({b});
  std::vector<Response> ready = Collect();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kOp);

  a.name = b.name = "h";
  b.shape = {7, 6};
  Add({a});
  Add({b});
  ExpectErrorSaying("Mismatched shapes (all dimensions but the first must match)");
}

TEST_F(CoordinatorTest, AllgatherResponsesCarryEveryMembersFirstDimension) {
  Start(3);
  Request a = Allreduce(0, "g", {2, 5});
  Request b = Allreduce(1, "g", {7, 5});
  a.type = b.type = OpType::kAllgather;
  Add({a});
  Add({Join(2)});  // contributes no rows
  Add({b});
  std::vector<Response> ready = Collect();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kOp);
  EXPECT_EQ(ready[0].tensor_sizes, (std::vector<int64_t>{2, 7, 0}));
  EXPECT_TRUE(ready[0].cacheable);
}

Request Alltoall(int32_t rank, const std::string& name, std::vector<int64_t> splits, std::vector<int64_t> shape) {
  Request r = Allreduce(rank, name, std::move(shape));
  r.type = OpType::kAlltoall;
  r.splits = std::move(splits);
  return r;
}

TEST_F(CoordinatorTest, AlltoallResponsesCarryTheTableOfEveryMembersSplits) {
  Start(3);
  Add({Alltoall(0, "a", {1, 0, 2}, {3, 4})});
  Add({Alltoall(1, "a", {0, 0, 0}, {0, 4})});
  Add({Alltoall(2, "a", {4, 1, 1}, {6, 4})});
  std::vector<Response> ready = Collect();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kOp);
  EXPECT_EQ(ready[0].tensor_sizes, (std::vector<int64_t>{1, 0, 2, 0, 0, 0, 4, 1, 1}));

  // A joined member's row is zeros: it sends nothing (and still receives its column).
  Add({Join(1)});
  Add({Alltoall(0, "b", {1, 1, 1}, {3})});
  Add({Alltoall(2, "b", {0, 2, 0}, {2})});
  ready = Collect();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].tensor_sizes, (std::vector<int64_t>{1, 1, 1, 0, 0, 0, 0, 2, 0}));
}

TEST_F(CoordinatorTest, AlltoallSplitsThatDoNotFitTheTensorAreAnError) {
  // Submission checks this (validation.cc); a request off the wire is checked again.
  Start(2);
  Add({Alltoall(0, "a", {1, 1}, {2})});
  Add({Alltoall(1, "a", {1, 2}, {2})});
  ExpectErrorSaying("rank 1 sent 2 splits for the shape [2]");
  Add({Alltoall(0, "b", {2}, {2})});
  Add({Alltoall(1, "b", {1, 1}, {2})});
  ExpectErrorSaying("rank 0 sent 1 splits");
  // Mismatched trailing dimensions are reported as before, ahead of the splits.
  Add({Alltoall(0, "c", {1, 1}, {2, 3})});
  Add({Alltoall(1, "c", {1, 1}, {2, 4})});
  ExpectErrorSaying("Mismatched shapes (all dimensions but the first must match)");
}

TEST_F(CoordinatorTest, OtherOpsCarryNoSizes) {
  Start(2);
  Add({Allreduce(0, "t")});
  Add({Allreduce(1, "t")});
  std::vector<Response> ready = Collect();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_TRUE(ready[0].tensor_sizes.empty());
}

TEST_F(CoordinatorTest, JoinedMembersCountAsHavingSubmitted) {
  Start(3);
  Add({Join(1)});
  Add({Allreduce(0, "t")});
  EXPECT_TRUE(Collect().empty());  // rank 2 has neither submitted nor joined
  Add({Join(2)});
  EXPECT_EQ(Names(Collect()), std::vector<std::string>{"t"});
}

TEST_F(CoordinatorTest, JoinCompletesWhenEveryMemberJoinedAndNamesTheLast) {
  Start(2);
  Add({Join(1)});
  EXPECT_TRUE(Collect().empty());
  Add({Join(0)});
  std::vector<Response> ready = Collect();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].type, OpType::kJoin);
  EXPECT_EQ(ready[0].last_joined_rank, 0);

  // A completed join starts over: the next tensor needs every member again.
  Add({Allreduce(0, "t")});
  EXPECT_TRUE(Collect().empty());
}

TEST_F(CoordinatorTest, BroadcastFromAJoinedRootIsAnError) {
  Start(2);
  Request b = Allreduce(0, "b");
  b.type = OpType::kBroadcast;
  b.root = 1;
  Add({Join(1)});
  Add({b});
  ExpectErrorSaying("already joined");
}

TEST_F(CoordinatorTest, ProcessSetChangesCannotRunWhileMembersHaveJoined) {
  Start(2);
  Request add = Allreduce(0, "add_process_set.1");
  add.type = OpType::kAddProcessSet;
  add.ranks = {0, 1};
  Add({Join(1)});
  Add({add});
  ExpectErrorSaying("have joined");
}

TEST_F(CoordinatorTest, GroupedTensorsGoOutTogetherAndAreNotCached) {
  Start(2);
  auto grouped = [](int32_t rank, const std::string& name) {
    Request r = Allreduce(rank, name);
    r.group_id = 7;
    r.group_size = 2;
    return r;
  };
  Add({grouped(0, "a"), grouped(0, "b")});
  Add({grouped(1, "a")});
  EXPECT_TRUE(Collect().empty());  // "a" is ready, but waits for the rest of its group
  Add({grouped(1, "b")});
  std::vector<Response> ready = Collect();
  EXPECT_EQ(Names(ready), (std::vector<std::string>{"a", "b"}));
  for (const Response& r : ready) EXPECT_FALSE(r.cacheable);
}

TEST_F(CoordinatorTest, CacheInvalidationsBecomeOneEraseOrderPerSlot) {
  Response cached;
  cached.names = {"t"};
  cached.shapes = {{4}};
  cache_.Put(cached);
  Start(2);
  Request r0 = Allreduce(0, "t", {8});
  Request r1 = Allreduce(1, "t", {8});
  r0.invalidates_cache = r1.invalidates_cache = true;
  Add({r0});
  Add({r1});
  EXPECT_EQ(out_.cache_erase, std::vector<int32_t>{cache_.SlotOf("t")});
}

TEST_F(CoordinatorTest, StalledTensorsNameWhoSubmittedAndWhoIsMissing) {
  Start(3);
  Add({Allreduce(0, "old")}, /*now_us=*/1'000'000);
  Add({Join(1)}, 1'000'000);
  Add({Allreduce(0, "new")}, 9'000'000);

  std::vector<StalledTensor> stalled = coordinator_->Stalled(/*now_us=*/10'000'000, /*min_age_us=*/5'000'000);
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0].name, "old");
  EXPECT_EQ(stalled[0].age_us, 9'000'000);
  EXPECT_EQ(stalled[0].submitted, std::vector<int32_t>{0});
  EXPECT_EQ(stalled[0].missing, std::vector<int32_t>{2});  // rank 1 joined: it is not missing

  EXPECT_EQ(coordinator_->Stalled(10'000'000, 0).size(), 2u);
}

}  // namespace
}  // namespace hvdcore
