#include "distributed/bucket_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace kiln::distributed {
namespace {

using Buckets = std::vector<std::vector<int>>;

// Unsharded (DDP), buckets fill in reverse parameter order to the byte limit, large or not.
TEST(BucketPlanTest, UnshardedFillsInReverseOrder) {
  EXPECT_EQ(PlanBuckets({100, 10, 100, 10}, 150, false), (Buckets{{3, 2, 1}, {0}}));
  EXPECT_EQ(PlanBuckets({100, 10, 100, 10}, 110, false), (Buckets{{3, 2}, {1, 0}}));
  EXPECT_EQ(PlanBuckets({1000, 10}, 150, false), (Buckets{{1}, {0}}));
  EXPECT_EQ(PlanBuckets({}, 150, false), Buckets{});
}

// Sharded, a parameter of at least 1/16 of a bucket travels alone; the small ones between the
// large ones share a bucket, which comes after the large ones that finish before its last.
// The MLP of the README's first command (784-256-256-10, f32) at the 4 MiB default: both large
// weights alone, the biases and the last layer together, reduced when the first bias is done.
TEST(BucketPlanTest, ShardedLargeParametersTravelAlone) {
  const std::vector<int64_t> mlp = {784 * 256 * 4, 256 * 4, 256 * 256 * 4, 256 * 4, 256 * 10 * 4, 10 * 4};
  EXPECT_EQ(PlanBuckets(mlp, int64_t{4} << 20, true), (Buckets{{2}, {5, 4, 3, 1}, {0}}));
  EXPECT_EQ(PlanBuckets(mlp, int64_t{4} << 20, false), (Buckets{{5, 4, 3, 2, 1, 0}}));
  // Small ones still close a bucket at the byte limit (32 one-byte parameters here, around a
  // large one); buckets are ordered by their last parameter.
  std::vector<int64_t> bytes(40, 1);
  bytes[20] = 100;
  std::vector<int> first;
  for (int i = 39; i >= 7; --i) {
    if (i != 20) first.push_back(i);
  }
  EXPECT_EQ(PlanBuckets(bytes, 32, true), (Buckets{{20}, first, {6, 5, 4, 3, 2, 1, 0}}));
  EXPECT_EQ(SoloBucketBytes(int64_t{4} << 20), 256 * 1024);
  EXPECT_EQ(SoloBucketBytes(1), 1);
}

// Every parameter is in exactly one bucket, and each bucket becomes ready (its lowest index
// done, in reverse order) no later than the next one.
TEST(BucketPlanTest, EveryParameterOnceAndBucketsInReadyOrder) {
  std::vector<int64_t> bytes;
  for (int i = 0; i < 40; ++i) bytes.push_back((i * 37) % 11 == 0 ? 4096 : 8 * (i % 7 + 1));
  for (bool solo : {false, true}) {
    const Buckets buckets = PlanBuckets(bytes, 64, solo);
    std::vector<int> seen(bytes.size(), 0);
    int last_ready = static_cast<int>(bytes.size());
    for (const std::vector<int>& b : buckets) {
      ASSERT_FALSE(b.empty());
      for (int i : b) ++seen[i];
      EXPECT_LT(b.back(), last_ready);
      last_ready = b.back();
    }
    for (int count : seen) EXPECT_EQ(count, 1);
  }
}

}  // namespace
}  // namespace kiln::distributed
