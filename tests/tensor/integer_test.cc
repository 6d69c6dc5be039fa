// Conformance: integer and bool tensors. Integer arithmetic wraps like two's complement (no
// undefined behaviour), division truncates toward zero, and bool reductions count.
#include <cstdint>
#include <limits>

#include "tests/tensor/conformance.h"

namespace kiln::testing {
namespace {

template <class B>
class Integer : public ::testing::Test {
 protected:
  void SetUp() override { KILN_SKIP_IF_UNAVAILABLE(B); }
  using Tn = Tensor<B>;
  template <class T>
  static Tn Of(std::vector<T> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    return Tn::from_vector(v, {n});
  }
  static std::vector<double> V(const Tn& t) { return t.to_data().ToDoubles(); }
};
TYPED_TEST_SUITE(Integer, AllBackends, ConfigNames);

TYPED_TEST(Integer, ArithmeticWrapsInsteadOfOverflowing) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  const auto a = this->Of(std::vector<int32_t>{kMax, kMin, 7, -7});
  const auto b = this->Of(std::vector<int32_t>{1, 1, 2, 2});
  EXPECT_EQ(this->V(a + b), (std::vector<double>{kMin, kMin + 1.0, 9, -5}));
  EXPECT_EQ(this->V(a - b), (std::vector<double>{kMax - 1.0, kMax, 5, -9}));
  EXPECT_EQ(this->V(a * b), (std::vector<double>{kMax, kMin, 14, -14}));
  EXPECT_EQ(this->V(a * 2), (std::vector<double>{-2, 0, 14, -14}));
  EXPECT_EQ(this->V(a.neg()), (std::vector<double>{-kMax, kMin, -7, 7}));
  EXPECT_EQ(this->V(a.abs()), (std::vector<double>{kMax, kMin, 7, 7}));
  EXPECT_EQ(this->V(a.relu()), (std::vector<double>{kMax, 0, 7, 0}));
  EXPECT_EQ((a + b).dtype(), DType::kI32);
}

TYPED_TEST(Integer, DivisionTruncatesAndRejectsZero) {
  const auto a = this->Of(std::vector<int64_t>{7, -7, 7, std::numeric_limits<int64_t>::min()});
  const auto b = this->Of(std::vector<int64_t>{2, 2, -2, -1});
  EXPECT_EQ(this->V(a / b), (std::vector<double>{3, -3, -3, static_cast<double>(std::numeric_limits<int64_t>::min())}));
  const auto zero = this->Of(std::vector<int64_t>{1, 0, 1, 1});
  try {
    (void)(a / zero);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(e.status().message(), "div: integer division by zero (i64[4] / i64[4])");
  }
}

TYPED_TEST(Integer, ComparisonsReductionsAndArgmax) {
  const auto a = this->Of(std::vector<int32_t>{5, -3, 9, 9, 0, 2});
  const auto m = a.reshape({2, 3});
  EXPECT_EQ(this->V(a.gt(2)), (std::vector<double>{1, 0, 1, 1, 0, 0}));
  EXPECT_EQ(this->V(m.sum({1})), (std::vector<double>{11, 11}));
  EXPECT_EQ(this->V(m.mean({1})), (std::vector<double>{3, 3}));  // 11 / 3 truncates
  EXPECT_EQ(this->V(m.max({0})), (std::vector<double>{9, 0, 9}));
  EXPECT_EQ(this->V(m.min({0})), (std::vector<double>{5, -3, 2}));
  EXPECT_EQ(this->V(m.argmax(1)), (std::vector<double>{2, 0}));
  EXPECT_EQ(this->V(a.maximum(a.neg())), (std::vector<double>{5, 3, 9, 9, 0, 2}));
  EXPECT_EQ(this->V(a.clamp(-1, 6)), (std::vector<double>{5, -1, 6, 6, 0, 2}));
  EXPECT_EQ(this->V(a * 2 - 1), (std::vector<double>{9, -7, 17, 17, -1, 3}));
  // Sums wrap rather than overflow.
  const auto big = this->Of(std::vector<int32_t>{std::numeric_limits<int32_t>::max(), 1});
  EXPECT_EQ(this->V(big.sum()), (std::vector<double>{std::numeric_limits<int32_t>::min()}));
}

TYPED_TEST(Integer, BoolTensorsCountAndSelect) {
  const auto a = this->Of(std::vector<int64_t>{1, 2, 3, 4});
  const auto mask = a.ge(3);
  EXPECT_EQ(mask.dtype(), DType::kBool);
  const auto count = mask.sum();
  EXPECT_EQ(count.dtype(), DType::kI64);
  EXPECT_EQ(count.template item<int64_t>(), 2);
  EXPECT_EQ(mask.mean().dtype(), DType::kF32);
  EXPECT_EQ(mask.mean().template item<double>(), 0.5);
  EXPECT_EQ(this->V(mask.eq(a.lt(3))), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(this->V(a.masked_fill(mask, 0)), (std::vector<double>{1, 2, 0, 0}));
  EXPECT_EQ(this->V(Tensor<TypeParam>::where(mask, a, a.neg())), (std::vector<double>{-1, -2, 3, 4}));
  EXPECT_EQ(mask.argmax().template item<int64_t>(), 2);
}

TYPED_TEST(Integer, ItemIsExactAndSafe) {
  using Tn = Tensor<TypeParam>;
  const int64_t big = (int64_t{1} << 62) + 1;  // not representable in double
  EXPECT_EQ(Tn::full({}, big, DType::kI64).template item<int64_t>(), big);
  EXPECT_EQ(Tn::full({1}, NAN, DType::kF32).template item<int32_t>(), 0);
  EXPECT_EQ(Tn::full({}, 1e30, DType::kF64).template item<int32_t>(), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(Tn::full({}, 3, DType::kI32).gt(2).template item<bool>(), true);
}

TYPED_TEST(Integer, LayoutOpsWorkOnEveryDType) {
  using Tn = Tensor<TypeParam>;
  const auto a = Tn::arange(6, DType::kI32).reshape({2, 3});
  EXPECT_EQ(this->V(a.transpose(0, 1)), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  const std::vector<Tn> parts = {a, a};
  EXPECT_EQ(this->V(Tn::cat(parts, 0).slice(0, 1, 4, 2)), (std::vector<double>{3, 4, 5, 3, 4, 5}));
  const auto idx = Tn::from_vector(std::vector<int64_t>{2, 0}, {2});
  EXPECT_EQ(this->V(a.index_select(1, idx)), (std::vector<double>{2, 0, 5, 3}));
  const auto b = a.gt(2);
  EXPECT_EQ(this->V(b.transpose(0, 1).reshape({-1})), (std::vector<double>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(this->V(a.to(DType::kI64).expand(Shape{2, 2, 3}).sum({0})), (std::vector<double>{0, 2, 4, 6, 8, 10}));
}

}  // namespace
}  // namespace kiln::testing
