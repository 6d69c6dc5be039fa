// The kernels' index math, on the CPU: StridedIndex offsets against a direct computation for
// dense, transposed, sliced, broadcast and size-1 layouts, and the coalescing that makes dense
// operands `flat`.
#include "backends/cuda/kernels/strided_index.h"

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

namespace kiln::cuda {
namespace {

using Vec = std::vector<int64_t>;

Vec Contiguous(const Vec& shape) {
  Vec s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

// Offset of row-major position `linear` in a view with these strides, the slow way.
int64_t Direct(const Vec& shape, const Vec& strides, int64_t linear) {
  int64_t offset = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    offset += (linear % shape[d]) * strides[d];
    linear /= shape[d];
  }
  return offset;
}

template <int N>
void ExpectMatches(const Vec& shape, const std::array<Vec, N>& strides) {
  std::array<const int64_t*, N> pointers;
  for (int k = 0; k < N; ++k) pointers[k] = strides[k].data();
  StridedIndex<N> index;
  ASSERT_TRUE(MakeStridedIndex<N>(static_cast<int>(shape.size()), shape.data(), pointers.data(), &index));
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  for (int64_t i = 0; i < numel; ++i) {
    int64_t got[N];
    index.Offsets(i, got);
    for (int k = 0; k < N; ++k) ASSERT_EQ(got[k], Direct(shape, strides[k], i)) << "position " << i << " operand " << k;
  }
}

TEST(StridedIndex, DenseOperandsAreFlat) {
  const Vec shape = {2, 3, 4};
  const Vec c = Contiguous(shape);
  const int64_t* p[2] = {c.data(), c.data()};
  StridedIndex<2> index;
  ASSERT_TRUE(MakeStridedIndex<2>(3, shape.data(), p, &index));
  EXPECT_TRUE(index.flat);
  EXPECT_EQ(index.rank, 1);
  EXPECT_EQ(index.sizes[0], 24);
  ExpectMatches<2>(shape, {c, c});
}

TEST(StridedIndex, ScalarAndSizeOneDims) {
  StridedIndex<1> scalar;
  const int64_t* none[1] = {nullptr};
  ASSERT_TRUE(MakeStridedIndex<1>(0, nullptr, none, &scalar));
  EXPECT_TRUE(scalar.flat);
  int64_t off = -1;
  scalar.Offsets(0, &off);
  EXPECT_EQ(off, 0);
  // Size-1 dims are dropped whatever their stride.
  ExpectMatches<2>({1, 5, 1}, {Vec{99, 1, 7}, Vec{0, 2, 0}});
}

TEST(StridedIndex, TransposedSlicedAndBroadcastViews) {
  // out dense [3,4]; a transposed [4,3] view; b broadcast along dim 0; c every other column.
  ExpectMatches<4>({3, 4}, {Vec{4, 1}, Vec{1, 3}, Vec{0, 1}, Vec{8, 2}});
  // A broadcast scalar is not flat (stride 0).
  const Vec shape = {6};
  const Vec zero = {0}, one = {1};
  const int64_t* p[2] = {one.data(), zero.data()};
  StridedIndex<2> index;
  ASSERT_TRUE(MakeStridedIndex<2>(1, shape.data(), p, &index));
  EXPECT_FALSE(index.flat);
  // Dims that merge for one operand but not another stay apart.
  ExpectMatches<2>({2, 3, 4}, {Contiguous({2, 3, 4}), Vec{12, 1, 3}});
}

TEST(StridedIndex, RandomPermutationsAndSlices) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    Vec shape(rank);
    for (auto& s : shape) s = 1 + static_cast<int64_t>(rng() % 4);
    // A permuted, sliced, partly broadcast view of a larger buffer.
    Vec base(rank);
    for (auto& s : base) s = 1 + static_cast<int64_t>(rng() % 3);
    Vec strides = Contiguous(shape);
    for (int d = 0; d < rank; ++d) {
      strides[d] *= base[d];
      if (rng() % 5 == 0) strides[d] = 0;
    }
    std::shuffle(strides.begin(), strides.end(), rng);
    ExpectMatches<3>(shape, {Contiguous(shape), strides, Vec(rank, 0)});
  }
}

TEST(StridedIndex, TooManyDimsIsRefused) {
  // kMaxDims + 1 dims of size 2 that cannot merge (strides 3^k, not 2x the next one).
  Vec shape(kMaxDims + 1, 2);
  Vec strides(shape.size());
  int64_t stride = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d, stride *= 3) strides[d] = stride;
  const int64_t* p[1] = {strides.data()};
  StridedIndex<1> index;
  EXPECT_FALSE(MakeStridedIndex<1>(static_cast<int>(shape.size()), shape.data(), p, &index));
  // The same dims dense merge into one and are fine.
  const Vec dense = Contiguous(shape);
  const int64_t* q[1] = {dense.data()};
  EXPECT_TRUE(MakeStridedIndex<1>(static_cast<int>(shape.size()), shape.data(), q, &index));
}

TEST(StridedIndex, LargeOffsetsUse64Bits) {
  // A 3 x 2^31 view with stride 2^32: offsets far past 32 bits.
  const Vec shape = {3, int64_t{1} << 31};
  const Vec strides = {int64_t{1} << 34, 2};
  const int64_t* p[1] = {strides.data()};
  StridedIndex<1> index;
  ASSERT_TRUE(MakeStridedIndex<1>(2, shape.data(), p, &index));
  int64_t off = 0;
  index.Offsets((int64_t{2} << 31) + 5, &off);
  EXPECT_EQ(off, (int64_t{2} << 34) + 10);
}

}  // namespace
}  // namespace kiln::cuda
