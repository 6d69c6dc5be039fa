// The one collective type's names: the first word of every signature and error, and the "op"
// bytes of every flight-recorder dump (tools/flight_recorder and the fuzz corpora read them),
// so they must not change.
#include <gtest/gtest.h>

#include "distributed/collective.h"
#include "distributed/collective_call.h"

namespace kiln::distributed {
namespace {

TEST(Collective, NamesAreTheDumpBytes) {
  EXPECT_STREQ(CollectiveName(Collective::kAllReduce), "all_reduce");
  EXPECT_STREQ(CollectiveName(Collective::kBroadcast), "broadcast");
  EXPECT_STREQ(CollectiveName(Collective::kAllGather), "all_gather");
  EXPECT_STREQ(CollectiveName(Collective::kReduceScatter), "reduce_scatter");
  EXPECT_STREQ(CollectiveName(Collective::kGradientSync), "gradient sync");
}

TEST(Collective, CallNamesCarryTheReductionOrRoot) {
  EXPECT_EQ(CollectiveCall::Name(Collective::kAllReduce, ReduceOp::kSum, 0), "all_reduce(sum)");
  EXPECT_EQ(CollectiveCall::Name(Collective::kAllReduce, ReduceOp::kMean, 3), "all_reduce(mean)");
  EXPECT_EQ(CollectiveCall::Name(Collective::kBroadcast, ReduceOp::kMax, 1), "broadcast(root 1)");
  EXPECT_EQ(CollectiveCall::Name(Collective::kAllGather, ReduceOp::kMin, 2), "all_gather");
  EXPECT_EQ(CollectiveCall::Name(Collective::kReduceScatter, ReduceOp::kMax, 0), "reduce_scatter(max)");
}

}  // namespace
}  // namespace kiln::distributed
