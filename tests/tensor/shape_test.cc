// Shapes, broadcasting rules, scalars and host data: the backend-independent pieces.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "tensor/random.h"
#include "tensor/scalar.h"
#include "tensor/shape.h"
#include "tensor/shape_rules.h"
#include "tensor/tensor_data.h"

namespace kiln {
namespace {

TEST(Shape, CountsAndStrides) {
  const Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.ContiguousStrides(), (Dims{12, 4, 1}));
  EXPECT_EQ(s.ToString(), "[2,3,4]");
  EXPECT_EQ(Shape().numel(), 1);
  EXPECT_EQ(Shape().ToString(), "[]");
  EXPECT_EQ((Shape{0, 5}).numel(), 0);
  EXPECT_THROW(Shape({int64_t{1} << 40, int64_t{1} << 40}), Error);  // overflows int64
  EXPECT_EQ((Shape{0, int64_t{1} << 40}).numel(), 0);
}

TEST(ShapeRules, Broadcasting) {
  EXPECT_EQ(*BroadcastShapes({2, 1, 3}, {4, 1}), Shape({2, 4, 3}));
  EXPECT_EQ(*BroadcastShapes({}, {5}), Shape({5}));
  EXPECT_EQ(*BroadcastShapes({0}, {1}), Shape({0}));
  EXPECT_FALSE(BroadcastShapes({2, 3}, {3, 2}).has_value());
  EXPECT_FALSE(BroadcastShapes({0}, {2}).has_value());
  EXPECT_TRUE(BroadcastsTo({3, 1}, {2, 3, 4}));
  EXPECT_FALSE(BroadcastsTo({2, 3, 4}, {3, 4}));
}

TEST(ShapeRules, ReducedShapesAndReshapes) {
  EXPECT_EQ(ReducedShape({2, 3, 4}, {0, 2}, false), Shape({3}));
  EXPECT_EQ(ReducedShape({2, 3, 4}, {0, 2}, true), Shape({1, 3, 1}));
  EXPECT_EQ(NormalizeReduceDims({-1, 0}, {2, 3, 4}, "sum"), (Dims{0, 2}));
  EXPECT_EQ(InferReshape({2, 3, 4}, {-1, 4}), Shape({6, 4}));
  const auto mm = MatmulShape({5, 1, 2, 3}, {4, 3, 7});
  ASSERT_TRUE(mm.out.has_value());
  EXPECT_EQ(*mm.out, Shape({5, 4, 2, 7}));
  EXPECT_EQ(MatmulShape({2, 3}, {4, 5}).problem, "inner dims differ (3 vs 4)");
}

TEST(Scalar, ConvertsWithoutUndefinedBehaviour) {
  EXPECT_EQ(Scalar(int64_t{1} << 62).as<int64_t>(), int64_t{1} << 62);  // exact, not via double
  EXPECT_EQ(Scalar(1e30).as<int32_t>(), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(Scalar(-1e30).as<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Scalar(std::numeric_limits<double>::quiet_NaN()).as<int32_t>(), 0);
  EXPECT_EQ(Scalar(int64_t{1} << 40).as<int32_t>(), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(Scalar(2.5).as<bool>(), true);
  EXPECT_EQ(Scalar(0).as<bool>(), false);
  EXPECT_EQ(Scalar(2.5).ToString(), "2.5");
}

TEST(TensorData, HoldsTypedValues) {
  const TensorData d = TensorData::FromVector(std::vector<int32_t>{1, -2, 3}, {3});
  EXPECT_EQ(d.dtype(), DType::kI32);
  EXPECT_EQ(d.nbytes(), 12);
  EXPECT_EQ(d.values<int32_t>()[1], -2);
  EXPECT_EQ(d.ToDoubles(), (std::vector<double>{1, -2, 3}));
  EXPECT_EQ(d.ToString(), "i32[3] {1, -2, 3}");
  EXPECT_THROW(TensorData::FromVector(std::vector<float>{1, 2}, {3}), Error);
  // bool spans cover the data too (a braced {pointer, size} once made a two-element list).
  TensorData b({5}, DType::kBool);
  b.mutable_values<bool>()[4] = true;
  EXPECT_EQ(b.values<bool>().size(), 5u);
  EXPECT_EQ(b.values<bool>().data(), b.raw());
  EXPECT_TRUE(b.values<bool>()[4]);
}

TEST(Random, UniformStaysInRangeForEveryDType) {
  Generator gen(11);
  for (DType t : {DType::kF32, DType::kF64}) {
    const TensorData d = RandomUniform({4096}, t, 2, 3, gen);
    for (double v : d.ToDoubles()) {
      EXPECT_GE(v, 2);
      EXPECT_LT(v, 3);
    }
  }
  // Near 1e8 an f32 step is 8: 1e8 + 7 rounds up to 1e8 + 8, which must not come out.
  for (double v : RandomUniform({1000}, DType::kF32, 1e8, 1e8 + 7, gen).ToDoubles()) {
    EXPECT_LT(v, 1e8 + 7);
  }
}

}  // namespace
}  // namespace kiln
