// ArrangeReduce against a brute-force reference: after the arrangement every element must sit
// at [o, r, i] with o * inner + i its result's position in ReducedShape's row-major order and
// r its row-major position among the reduced coordinates, for every subset of dims.
#include "tensor/reduce_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "tensor/shape_rules.h"

namespace kiln {
namespace {

// Row-major rank of `coords` within `extents`.
int64_t RowMajor(const Dims& coords, const Dims& extents) {
  int64_t at = 0;
  for (size_t d = 0; d < extents.size(); ++d) at = at * extents[d] + coords[d];
  return at;
}

void ExpectArrangementMatches(const Shape& shape, const Dims& dims) {
  SCOPED_TRACE(shape.ToString() + " over dims " + ::testing::PrintToString(dims));
  const ReduceLayout l = ArrangeReduce(shape, dims);
  EXPECT_EQ(l.outer * l.reduced * l.inner, shape.numel());
  EXPECT_EQ(l.outer * l.inner, ReducedShape(shape, dims, false).numel());

  Dims order(shape.rank());  // the arranged tensor's dims, in the input's numbering
  std::iota(order.begin(), order.end(), 0);
  if (!l.permutation.empty()) {
    order = l.permutation;
    EXPECT_EQ(l.inner, 1);  // the reduced dims were moved to the end
  }
  Dims arranged_extents, kept_extents, reduced_extents;
  for (int64_t d : order) arranged_extents.push_back(shape[d]);
  for (int64_t d = 0; d < shape.rank(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    (reduced ? reduced_extents : kept_extents).push_back(shape[d]);
  }
  Dims coords(shape.rank(), 0);
  for (int64_t n = 0; n < shape.numel(); ++n) {
    Dims arranged, kept, reduced;
    for (int64_t d : order) arranged.push_back(coords[d]);
    for (int64_t d = 0; d < shape.rank(); ++d) {
      const bool is_reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
      (is_reduced ? reduced : kept).push_back(coords[d]);
    }
    const int64_t flat = RowMajor(arranged, arranged_extents);
    const int64_t o = flat / (l.reduced * l.inner);
    const int64_t r = flat / l.inner % l.reduced, i = flat % l.inner;
    ASSERT_EQ(o * l.inner + i, RowMajor(kept, kept_extents));
    ASSERT_EQ(r, RowMajor(reduced, reduced_extents));
    for (int64_t d = shape.rank() - 1; d >= 0 && ++coords[d] == shape[d]; --d) coords[d] = 0;
  }
}

TEST(ReduceLayout, EveryDimSubsetOfSeveralShapes) {
  for (const Shape& shape :
       {Shape{5}, Shape{2, 3}, Shape{2, 3, 4}, Shape{3, 1, 2, 5}, Shape{2, 0, 3}, Shape{2, 1, 3, 1, 2, 2, 3}}) {
    for (int64_t mask = 1; mask < (int64_t{1} << shape.rank()); ++mask) {
      Dims dims;
      for (int64_t d = 0; d < shape.rank(); ++d) {
        if (mask >> d & 1) dims.push_back(d);
      }
      ExpectArrangementMatches(shape, dims);
    }
  }
}

TEST(ReduceLayout, PermutesOnlyWhenReducedDimsHaveAGap) {
  EXPECT_TRUE(ConsecutiveDims(Dims{1, 2}));
  EXPECT_FALSE(ConsecutiveDims(Dims{0, 2}));
  EXPECT_TRUE(ArrangeReduce(Shape{2, 3, 4}, Dims{1, 2}).permutation.empty());
  EXPECT_FALSE(ArrangeReduce(Shape{2, 3, 4}, Dims{0, 2}).permutation.empty());
}

}  // namespace
}  // namespace kiln
