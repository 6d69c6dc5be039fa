// Conformance: element-wise ops, broadcasting, scalars, where, on every backend.
#include <cmath>

#include "tests/tensor/conformance.h"

namespace kiln::testing {
namespace {

template <class C>
class Elementwise : public Conformance<C> {};
TYPED_TEST_SUITE(Elementwise, FloatConfigs, ConfigNames);

TYPED_TEST(Elementwise, UnaryOpsMatchTheStandardLibrary) {
  using Tn = typename TestFixture::Tn;
  struct Case {
    const char* name;
    Tn (*op)(const Tn&);
    double (*ref)(double);
    double low, high;
  };
  const Case cases[] = {
      {"neg", [](const Tn& t) { return t.neg(); }, [](double x) { return -x; }, -3, 3},
      {"abs", [](const Tn& t) { return t.abs(); }, [](double x) { return std::abs(x); }, -3, 3},
      {"exp", [](const Tn& t) { return t.exp(); }, [](double x) { return std::exp(x); }, -5, 5},
      {"log", [](const Tn& t) { return t.log(); }, [](double x) { return std::log(x); }, 0.01, 9},
      {"sqrt", [](const Tn& t) { return t.sqrt(); }, [](double x) { return std::sqrt(x); }, 0, 9},
      {"tanh", [](const Tn& t) { return t.tanh(); }, [](double x) { return std::tanh(x); }, -4, 4},
      {"sigmoid", [](const Tn& t) { return t.sigmoid(); }, [](double x) { return 1 / (1 + std::exp(-x)); }, -9, 9},
      {"relu", [](const Tn& t) { return t.relu(); }, [](double x) { return x > 0 ? x : 0; }, -2, 2},
      {"erf", [](const Tn& t) { return t.erf(); }, [](double x) { return std::erf(x); }, -4, 4},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // 1000 elements: past any vector width, with a tail.
    const Tn x = this->Random({10, 100}, c.low, c.high);
    this->ExpectClose(c.op(x), Map(this->R(x), c.ref), 4);
    this->ExpectClose(c.op(this->Strided(x)), Map(this->R(x), c.ref), 4);
    this->ExpectClose(c.op(x.transpose(0, 1)), Permute(Map(this->R(x), c.ref), {1, 0}), 4);
    EXPECT_EQ(c.op(Tn::zeros({0, 3}, this->kDType)).shape(), Shape({0, 3}));
    this->ExpectClose(c.op(Tn::full({}, 0.5, this->kDType)), Map(Ref{{}, {0.5}}, c.ref), 4);
  }
}

TYPED_TEST(Elementwise, ReluKeepsNaN) {
  using Tn = typename TestFixture::Tn;
  const Tn x = Tn::from_vector(TestFixture::Values({NAN, -1, 2}), {3});
  const auto y = x.relu().to_data().ToDoubles();
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 0);
  EXPECT_EQ(y[2], 2);
}

// Shape pairs that cover every broadcasting rule, including scalars and empty dims.
const std::vector<std::pair<Shape, Shape>>& BroadcastCases() {
  static const auto* cases = new std::vector<std::pair<Shape, Shape>>{
      {{2, 3}, {2, 3}},       {{2, 3}, {3}},          {{2, 1}, {1, 3}},   {{4, 1, 3}, {2, 1}},
      {{}, {2, 3}},           {{2, 3}, {}},           {{0, 3}, {3}},      {{1}, {0}},
      {{3, 1, 2}, {3, 4, 1}}, {{5, 1, 1, 7}, {6, 1}}, {{65, 130}, {130}}, {{1, 130}, {65, 1}},
  };
  return *cases;
}

TYPED_TEST(Elementwise, BinaryOpsBroadcastLikeNumPy) {
  using Tn = typename TestFixture::Tn;
  struct Case {
    BinaryOp op;
    double (*ref)(double, double);
  };
  const Case cases[] = {
      {BinaryOp::kAdd, [](double a, double b) { return a + b; }},
      {BinaryOp::kSub, [](double a, double b) { return a - b; }},
      {BinaryOp::kMul, [](double a, double b) { return a * b; }},
      {BinaryOp::kDiv, [](double a, double b) { return a / b; }},
      {BinaryOp::kPow, [](double a, double b) { return std::pow(a, b); }},
      {BinaryOp::kMaximum, [](double a, double b) { return std::max(a, b); }},
      {BinaryOp::kMinimum, [](double a, double b) { return std::min(a, b); }},
  };
  for (const auto& [sa, sb] : BroadcastCases()) {
    // Positive operands keep pow real and div away from zero.
    const Tn a = this->Random(sa, 0.5, 3, 1);
    const Tn b = this->Random(sb, 0.5, 3, 2);
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(OpName(c.op)) + " " + sa.ToString() + " " + sb.ToString());
      const Ref want = Zip(this->R(a), this->R(b), c.ref);
      this->ExpectClose(a.binary(c.op, b), want, 8);
      this->ExpectClose(this->Strided(a).binary(c.op, this->Strided(b)), want, 8);
    }
  }
}

TYPED_TEST(Elementwise, ComparisonsGiveBool) {
  using Tn = typename TestFixture::Tn;
  const Tn a = Tn::from_vector(TestFixture::Values({1, 2, 3, 4, 5, 6}), {2, 3});
  const Tn b = Tn::from_vector(TestFixture::Values({2, 2, 7}), {3});
  struct Case {
    Tn result;
    std::vector<double> want;
  };
  const Case cases[] = {
      {a.eq(b), {0, 1, 0, 0, 0, 0}}, {a.ne(b), {1, 0, 1, 1, 1, 1}},
      {a.lt(b), {1, 0, 1, 0, 0, 1}}, {a.le(b), {1, 1, 1, 0, 0, 1}},
      {a.gt(b), {0, 0, 0, 1, 1, 0}}, {a.ge(b), {0, 1, 0, 1, 1, 0}},
      {a.gt(3), {0, 0, 0, 1, 1, 1}}, {this->Strided(a).le(2.5), {1, 1, 0, 0, 0, 0}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.result.dtype(), DType::kBool);
    EXPECT_EQ(c.result.shape(), Shape({2, 3}));
    EXPECT_EQ(c.result.to_data().ToDoubles(), c.want);
  }
}

TYPED_TEST(Elementwise, ScalarOverloads) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({4, 5}, 0.5, 2);
  const Ref r = this->R(x);
  this->ExpectClose(x + 2, Map(r, [](double v) { return v + 2; }));
  this->ExpectClose(2 + x, Map(r, [](double v) { return v + 2; }));
  this->ExpectClose(x - 1.5, Map(r, [](double v) { return v - 1.5; }));
  this->ExpectClose(1.5 - x, Map(r, [](double v) { return 1.5 - v; }));
  this->ExpectClose(x * 3, Map(r, [](double v) { return v * 3; }));
  this->ExpectClose(3 * x, Map(r, [](double v) { return v * 3; }));
  this->ExpectClose(x / 4, Map(r, [](double v) { return v / 4; }));
  this->ExpectClose(1 / x, Map(r, [](double v) { return 1 / v; }));
  this->ExpectClose(-x, Map(r, [](double v) { return -v; }));
  this->ExpectClose(x.pow(2), Map(r, [](double v) { return v * v; }));
  this->ExpectClose(x.pow(0.5), Map(r, [](double v) { return std::sqrt(v); }), 4);
  this->ExpectClose(x.pow(-1.5), Map(r, [](double v) { return std::pow(v, -1.5); }), 4);
  this->ExpectClose(x.clamp(0.8, 1.2), Map(r, [](double v) { return std::clamp(v, 0.8, 1.2); }));
}

TYPED_TEST(Elementwise, MaximumAndMinimumPropagateNaN) {
  using Tn = typename TestFixture::Tn;
  const Tn a = Tn::from_vector(TestFixture::Values({NAN, 1, 2}), {3});
  const Tn b = Tn::from_vector(TestFixture::Values({0, NAN, 3}), {3});
  for (const Tn& r : {a.maximum(b), a.minimum(b)}) {
    const auto v = r.to_data().ToDoubles();
    EXPECT_TRUE(std::isnan(v[0]));
    EXPECT_TRUE(std::isnan(v[1]));
  }
  EXPECT_EQ(a.maximum(b).to_data().ToDoubles()[2], 3);
  EXPECT_EQ(a.minimum(b).to_data().ToDoubles()[2], 2);
}

TYPED_TEST(Elementwise, WhereAndMaskedFillBroadcast) {
  using Tn = typename TestFixture::Tn;
  const Tn a = this->Random({3, 4}, -1, 1, 1);
  const Tn b = this->Random({4}, -1, 1, 2);
  const Tn cond = this->Random({3, 1}, -1, 1, 3).gt(0);
  const Ref rc = Ref::Of(cond.to(this->kDType).to_data());
  const Ref ra = this->R(a), rb = this->R(b);
  Ref want = Make({3, 4});
  for (int64_t i = 0; i < 12; ++i) {
    const Index idx = Unravel(i, {3, 4});
    want.v[i] = BroadcastAt(rc, idx) != 0 ? BroadcastAt(ra, idx) : BroadcastAt(rb, idx);
  }
  this->ExpectExact(Tn::where(cond, a, b), want);
  this->ExpectExact(Tn::where(cond, this->Strided(a), b), want);

  const Tn mask = a.gt(0);
  this->ExpectExact(a.masked_fill(mask, -7), Map(ra, [](double v) { return v > 0 ? -7 : v; }));
}

TYPED_TEST(Elementwise, LargeTensorsSplitAcrossThreadsGiveTheSameValues) {
  using Tn = typename TestFixture::Tn;
  // Larger than one parallel chunk, with a broadcast operand and a strided one.
  const Tn a = this->Random({300, 1001}, -1, 1, 1);
  const Tn b = this->Random({1001}, -1, 1, 2);
  this->ExpectClose(a * b + a.exp(),
                    Zip(Zip(this->R(a), this->R(b), std::multiplies<>()),
                        Map(this->R(a), [](double v) { return std::exp(v); }), std::plus<>()),
                    4);
  this->ExpectClose(a.transpose(0, 1).sigmoid(),
                    Permute(Map(this->R(a), [](double v) { return 1 / (1 + std::exp(-v)); }), {1, 0}), 4);
}

}  // namespace
}  // namespace kiln::testing
