// The shard layout against plain index arithmetic: member g's chunk of a parameter is its
// elements [g*c, (g+1)*c) (c = ceil(n / N)), zero-padded; a bucket travels member-major, and
// unpacking the gathered bucket gives back every tensor.
#include "distributed/shard_layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "backends/cpu/cpu_backend.h"

namespace kiln::distributed {
namespace {

using T = Tensor<Cpu>;

T Iota(Shape shape, double first) {
  std::vector<double> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = first + static_cast<double>(i);
  return T::from_vector(v, shape);
}

// Member g's chunk written out by hand: element j is the parameter's g*c + j, or 0 past n.
std::vector<double> ExpectedChunk(const T& full, int g, int members) {
  const std::vector<double> v = full.to_data().ToDoubles();
  const int64_t n = full.numel(), c = (n + members - 1) / members;
  std::vector<double> out;
  for (int64_t j = 0; j < c; ++j) out.push_back(g * c + j < n ? v[g * c + j] : 0.0);
  return out;
}

TEST(ShardLayout, ChunksAreEqualAndPaddedWithZeros) {
  EXPECT_EQ(ChunkSize(12, 4), 3);
  EXPECT_EQ(ChunkSize(13, 4), 4);
  EXPECT_EQ(ChunkSize(3, 4), 1);
  EXPECT_EQ(ChunkSize(1, 1), 1);
  for (Shape shape : {Shape({3, 4}), Shape({13}), Shape({3}), Shape({2, 1, 3})}) {
    const T full = Iota(shape, 1);
    for (int members : {1, 2, 3, 4, 5}) {
      for (int g = 0; g < members; ++g) {
        EXPECT_EQ(ChunkOf(full, g, members).to_data().ToDoubles(), ExpectedChunk(full, g, members))
            << shape.ToString() << " member " << g << " of " << members;
      }
    }
  }
}

// Member g's part of the packed bucket is its chunk of each tensor in turn, and unpacking the
// whole bucket gives every tensor back.
TEST(ShardLayout, BucketsAreMemberMajorAndUnpackToTheTensors) {
  const std::vector<T> tensors = {Iota({3, 4}, 1), Iota({3}, 100), Iota({5}, 200)};
  const std::vector<Shape> shapes = {Shape({3, 4}), Shape({3}), Shape({5})};
  for (int members : {1, 2, 3, 4, 5}) {
    const T bucket = PackMemberMajor<Cpu>(tensors, members);
    std::vector<int64_t> chunks;
    for (const T& t : tensors) chunks.push_back(ChunkSize(t.numel(), members));
    int64_t part = 0;
    for (int64_t c : chunks) part += c;
    ASSERT_EQ(bucket.numel(), part * members);
    for (int g = 0; g < members; ++g) {
      const std::vector<T> mine = SplitChunks(bucket.slice(0, g * part, (g + 1) * part), chunks);
      for (size_t i = 0; i < tensors.size(); ++i) {
        EXPECT_EQ(mine[i].to_data().ToDoubles(), ExpectedChunk(tensors[i], g, members)) << members << " " << g;
      }
    }
    const std::vector<T> back = UnpackMemberMajor(bucket, shapes, members);
    for (size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_EQ(back[i].shape(), shapes[i]);
      EXPECT_EQ(back[i].to_data().ToDoubles(), tensors[i].to_data().ToDoubles()) << members << " " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::distributed
