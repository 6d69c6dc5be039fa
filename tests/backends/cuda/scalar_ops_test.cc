// The CUDA kernels' per-element rules, run on the CPU, against the CPU backend's: the same
// functions are compiled into the kernels (backends/cuda/kernels/scalar_ops.h).
#include "backends/cuda/kernels/scalar_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tensor/scalar.h"

namespace kiln::cuda::kernels {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

template <class To, class From>
void ExpectConvertMatchesCpu(const std::vector<From>& values) {
  for (From v : values) {
    EXPECT_EQ((Convert<To, From>(v)), (Scalar::FloatToInt<To, From>(v))) << v;
  }
}

TEST(ScalarOps, FloatToIntSaturatesAndMapsNanToZero) {
  const std::vector<double> d = {0.0,          -0.0,          1.9,    -1.9,    2147483647.0,
                                 2147483648.0, -2147483649.0, 9.3e18, -9.3e18, 9.2233720368547758e18,
                                 kInf,         -kInf,         kNan,   1e300};
  ExpectConvertMatchesCpu<int32_t>(d);
  ExpectConvertMatchesCpu<int64_t>(d);
  const std::vector<float> f = {0.0f,
                                2.5f,
                                -2.5f,
                                2147483648.0f,
                                -2147483648.0f,
                                9.3e18f,
                                -9.3e18f,
                                static_cast<float>(kInf),
                                static_cast<float>(kNan)};
  ExpectConvertMatchesCpu<int32_t>(f);
  ExpectConvertMatchesCpu<int64_t>(f);
  EXPECT_EQ((Convert<int32_t, double>(kNan)), 0);
  EXPECT_EQ((Convert<int64_t, double>(kInf)), std::numeric_limits<int64_t>::max());
}

TEST(ScalarOps, ToBoolIsNotZero) {
  EXPECT_FALSE((Convert<bool, double>(0.0)));
  EXPECT_FALSE((Convert<bool, double>(-0.0)));
  EXPECT_TRUE((Convert<bool, double>(kNan)));  // NaN != 0, as on the CPU
  EXPECT_TRUE((Convert<bool, int64_t>(-5)));
  EXPECT_EQ((Convert<float, bool>(true)), 1.0f);
  EXPECT_EQ((Convert<int32_t, int64_t>(int64_t{1} << 32 | 7)), 7);  // int -> int wraps
}

TEST(ScalarOps, IntegerArithmeticWraps) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(IntegerBinary<int32_t>(BinaryOp::kAdd, kMax, 1, nullptr), kMin);
  EXPECT_EQ(IntegerBinary<int32_t>(BinaryOp::kSub, kMin, 1, nullptr), kMax);
  EXPECT_EQ(IntegerBinary<int32_t>(BinaryOp::kMul, kMax, 2, nullptr), -2);
  EXPECT_EQ(IntegerUnary<int32_t>(UnaryOp::kNeg, kMin), kMin);
  EXPECT_EQ(IntegerUnary<int32_t>(UnaryOp::kAbs, kMin), kMin);
  EXPECT_EQ(IntegerUnary<int32_t>(UnaryOp::kAbs, -7), 7);
  EXPECT_EQ(IntegerUnary<int64_t>(UnaryOp::kRelu, -7), 0);
  EXPECT_EQ(WrapAdd<int64_t>(std::numeric_limits<int64_t>::max(), 1), std::numeric_limits<int64_t>::min());
}

TEST(ScalarOps, IntegerDivisionTruncatesAndFlagsZero) {
  int flag = 0;
  EXPECT_EQ(IntegerBinary<int64_t>(BinaryOp::kDiv, 7, 2, &flag), 3);
  EXPECT_EQ(IntegerBinary<int64_t>(BinaryOp::kDiv, -7, 2, &flag), -3);
  EXPECT_EQ(IntegerBinary<int64_t>(BinaryOp::kDiv, std::numeric_limits<int64_t>::min(), -1, &flag),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(IntegerBinary<int32_t>(BinaryOp::kDiv, 7, 0, &flag), 0);
  EXPECT_EQ(flag, 1);
}

TEST(ScalarOps, MaxAndMinPropagateNan) {
  EXPECT_TRUE(std::isnan(NanMax(1.0, kNan)));
  EXPECT_TRUE(std::isnan(NanMax(kNan, 1.0)));
  EXPECT_TRUE(std::isnan(NanMin(1.0f, static_cast<float>(kNan))));
  EXPECT_EQ(NanMax(-kInf, 3.0), 3.0);
  EXPECT_EQ(NanMin(2, -4), -4);
  EXPECT_TRUE(std::isnan(FloatBinary(BinaryOp::kMaximum, kNan, 0.0)));
  EXPECT_FALSE(Compare(BinaryOp::kEq, kNan, kNan));
  EXPECT_TRUE(Compare(BinaryOp::kNe, kNan, kNan));
}

// Argmax combined in a tree, in any order, gives the first maximum, NaN counting as largest.
template <class V>
int64_t TreeArgmax(const std::vector<V>& x, int stride) {
  std::vector<std::pair<V, int64_t>> level;
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) level.push_back({x[i], i});
  while (level.size() > 1) {
    std::vector<std::pair<V, int64_t>> next;
    for (size_t i = 0; i < level.size(); i += stride) {
      auto best = level[i];
      for (size_t j = i + 1; j < std::min(level.size(), i + stride); ++j) {
        if (ArgmaxBetter(level[j].first, level[j].second, best.first, best.second)) best = level[j];
      }
      next.push_back(best);
    }
    // Reverse to combine in another order next time.
    std::reverse(next.begin(), next.end());
    level = next;
  }
  return level[0].second;
}

TEST(ScalarOps, ArgmaxPrefersNanThenTheFirstIndex) {
  const std::vector<double> ties = {1, 5, 2, 5, 5, 0};
  const std::vector<double> nans = {1, kNan, 9, kNan, 9};
  const std::vector<double> lows = {-kInf, -kInf, -kInf};
  for (int stride : {2, 3, 32}) {
    EXPECT_EQ(TreeArgmax(ties, stride), 1);
    EXPECT_EQ(TreeArgmax(nans, stride), 1);
    EXPECT_EQ(TreeArgmax(lows, stride), 0);
    EXPECT_EQ(TreeArgmax(std::vector<int>{3, 7, 7, -1}, stride), 1);
  }
}

}  // namespace
}  // namespace kiln::cuda::kernels
