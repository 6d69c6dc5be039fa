// The typed fixture of the conformance suite: one backend, one float type, and helpers to
// build inputs (contiguous or as strided views) and compare them with the reference.
#ifndef KILN_TESTS_TENSOR_CONFORMANCE_H_
#define KILN_TESTS_TENSOR_CONFORMANCE_H_

#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <vector>

#include "tensor/random.h"
#include "tensor/tensor.h"
#include "tests/backends.h"
#include "tests/tensor/reference.h"

namespace kiln::testing {

template <class C>
class Conformance : public ::testing::Test {
 protected:
  using B = typename C::B;
  void SetUp() override { KILN_SKIP_IF_UNAVAILABLE(B); }
  using T = typename C::T;
  using Tn = Tensor<B>;
  static constexpr DType kDType = DTypeOf<T>();

  // Uniform values in [low, high) from a fixed seed.
  Tn Random(const Shape& shape, double low = -2, double high = 2, uint64_t seed = 7) {
    Generator gen(seed);
    return Tn::uniform(shape, low, high, gen, kDType);
  }

  // The same values as `t`, laid out with a stride of 2 in the last dim (not contiguous).
  static Tn Strided(const Tn& t) {
    if (t.rank() == 0) return t;
    const std::vector<Tn> pair = {t, t.neg()};
    return Tn::stack(pair, -1).slice(-1, 0, 1).squeeze(-1);
  }

  static Ref R(const Tn& t) { return Ref::Of(t.to_data()); }

  // T's unit roundoff u: half the distance from 1 to the next value (2^-8 bf16, 2^-11 f16,
  // 2^-24 f32, 2^-53 f64).
  static constexpr double kUnitRoundoff = std::is_same_v<T, BFloat16>  ? 0x1p-8
                                          : std::is_same_v<T, Float16> ? 0x1p-11
                                          : std::is_same_v<T, float>   ? 0x1p-24
                                                                       : 0x1p-53;
  // Closeness in units of u. f32 and f64 keep the suite's first tolerances (2e-6 and 1e-13:
  // 33.6u and 900.8u), since their kernels round at every step of a long sum. A half result is
  // computed in f32 from exact half inputs and rounded once, so it is within u of the reference:
  // 2u leaves room for the f32 arithmetic under it. Tests scale this for chained ops.
  static constexpr double kTolerance = kUnitRoundoff * (kIsHalf<T> ? 2 : sizeof(T) == 4 ? 33.6 : 900.8);

  // A vector of T from doubles (rounded to nearest even for the half types).
  static std::vector<T> Values(std::initializer_list<double> v) {
    std::vector<T> out;
    for (double x : v) out.push_back(static_cast<T>(x));
    return out;
  }

  // Relative-and-absolute closeness at the precision of T, scaled by `scale`.
  static void ExpectClose(const Tn& actual, const Ref& expected, double scale = 1.0) {
    const TensorData data = actual.to_data();
    ASSERT_EQ(data.dtype(), kDType);
    ASSERT_EQ(Index(data.shape().dims().begin(), data.shape().dims().end()), expected.shape);
    const double tol = kTolerance * scale;
    for (int64_t i = 0; i < data.numel(); ++i) {
      const double want = expected.v[i], got = data.AsDouble(i);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << "element " << i;
        continue;
      }
      if (std::isinf(want)) {
        EXPECT_EQ(got, want) << "element " << i;
        continue;
      }
      EXPECT_NEAR(got, want, tol * (1 + std::abs(want))) << "element " << i;
    }
  }

  // Exact equality, for results that involve no rounding (copies, layout, comparisons).
  static void ExpectExact(const Tn& actual, const Ref& expected) {
    const TensorData data = actual.to_data();
    ASSERT_EQ(Index(data.shape().dims().begin(), data.shape().dims().end()), expected.shape);
    for (int64_t i = 0; i < data.numel(); ++i) {
      EXPECT_EQ(data.AsDouble(i), expected.v[i]) << "element " << i;
    }
  }
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_TENSOR_CONFORMANCE_H_
