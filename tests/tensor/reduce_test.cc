// Conformance: reductions over all or given dims, argmax, softmax and log_softmax.
#include <cmath>

#include "tests/tensor/conformance.h"

namespace kiln::testing {
namespace {

template <class C>
class Reduce : public Conformance<C> {};
TYPED_TEST_SUITE(Reduce, FloatConfigs, ConfigNames);

TYPED_TEST(Reduce, EveryOpOverEveryDimSet) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({3, 4, 5});
  const std::vector<Index> dim_sets = {{}, {0}, {1}, {2}, {-1}, {0, 2}, {1, 2}, {0, 1}, {2, 0, 1}};
  const std::pair<ReduceOp, RefReduce> ops[] = {{ReduceOp::kSum, RefReduce::kSum},
                                                {ReduceOp::kMean, RefReduce::kMean},
                                                {ReduceOp::kMax, RefReduce::kMax},
                                                {ReduceOp::kMin, RefReduce::kMin}};
  for (const Index& dims : dim_sets) {
    for (bool keepdim : {false, true}) {
      for (const auto& [op, ref] : ops) {
        SCOPED_TRACE(std::string(OpName(op)) + " dims " + ::testing::PrintToString(dims) + (keepdim ? " keepdim" : ""));
        const Ref want = kiln::testing::Reduce(this->R(x), dims, keepdim, ref);
        this->ExpectClose(x.reduce(op, dims, keepdim), want, 8);
        this->ExpectClose(this->Strided(x).reduce(op, dims, keepdim), want, 8);
        this->ExpectClose(x.permute({2, 0, 1}).reduce(op, dims, keepdim),
                          kiln::testing::Reduce(Permute(this->R(x), {2, 0, 1}), dims, keepdim, ref), 8);
      }
    }
  }
}

TYPED_TEST(Reduce, ConvenienceOverloads) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({2, 3});
  this->ExpectClose(x.sum(), kiln::testing::Reduce(this->R(x), {}, false, RefReduce::kSum));
  this->ExpectClose(x.mean({1}), kiln::testing::Reduce(this->R(x), {1}, false, RefReduce::kMean));
  this->ExpectClose(x.max({0}, true), kiln::testing::Reduce(this->R(x), {0}, true, RefReduce::kMax));
  this->ExpectClose(x.min({-1}), kiln::testing::Reduce(this->R(x), {1}, false, RefReduce::kMin));
  EXPECT_EQ(x.sum().rank(), 0);
}

TYPED_TEST(Reduce, LongRowsAndWideColumns) {
  using Tn = typename TestFixture::Tn;
  // Rows longer than one partial block, and a reduction over the outer dim of a wide matrix.
  const Tn x = this->Random({3, 40000}, 0, 1);
  const double scale = sizeof(typename TestFixture::T) == 4 ? 200 : 100;
  this->ExpectClose(x.sum({1}), kiln::testing::Reduce(this->R(x), {1}, false, RefReduce::kSum), scale);
  this->ExpectClose(x.sum(), kiln::testing::Reduce(this->R(x), {}, false, RefReduce::kSum), scale);
  this->ExpectClose(x.max({1}), kiln::testing::Reduce(this->R(x), {1}, false, RefReduce::kMax));
  const Tn w = this->Random({300, 2100}, 0, 1);
  this->ExpectClose(w.sum({0}), kiln::testing::Reduce(this->R(w), {0}, false, RefReduce::kSum), scale);
  this->ExpectClose(w.min({0}), kiln::testing::Reduce(this->R(w), {0}, false, RefReduce::kMin));
}

TYPED_TEST(Reduce, SameResultWhateverTheThreadCount) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({1 << 20}, 0, 1);
  const auto sum = x.sum().to_data().ToDoubles();
  // The sum is combined in a fixed order, so repeating it is bit-identical.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(x.sum().to_data().ToDoubles(), sum);
}

TYPED_TEST(Reduce, EmptyAndScalarInputs) {
  using Tn = typename TestFixture::Tn;
  const Tn empty = Tn::zeros({0, 3}, this->kDType);
  EXPECT_EQ(empty.sum({0}).to_data().ToDoubles(), std::vector<double>(3, 0.0));
  EXPECT_EQ(empty.sum({1}).shape(), Shape({0}));
  for (double v : empty.mean({0}).to_data().ToDoubles()) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(empty.sum().template item<double>(), 0);
  const Tn scalar = Tn::full({}, 4.5, this->kDType);
  EXPECT_EQ(scalar.sum().template item<double>(), 4.5);
  EXPECT_EQ(scalar.max().template item<double>(), 4.5);
}

TYPED_TEST(Reduce, MaxAndMinPropagateNaN) {
  using Tn = typename TestFixture::Tn;
  const Tn x = Tn::from_vector(TestFixture::Values({1, NAN, 3, 4, 5, 6}), {2, 3});
  EXPECT_TRUE(std::isnan(x.max({1}).to_data().ToDoubles()[0]));
  EXPECT_EQ(x.max({1}).to_data().ToDoubles()[1], 6);
  EXPECT_TRUE(std::isnan(x.min({0}).to_data().ToDoubles()[1]));
}

TYPED_TEST(Reduce, ArgmaxTakesTheFirstMaximum) {
  using Tn = typename TestFixture::Tn;
  const Tn x = Tn::from_vector(TestFixture::Values({1, 5, 5, 2, 9, 0, 9, 3}), {2, 4});
  const Tn rows = x.argmax(1);
  EXPECT_EQ(rows.dtype(), DType::kI64);
  EXPECT_EQ(rows.to_data().ToDoubles(), (std::vector<double>{1, 0}));
  EXPECT_EQ(x.argmax(0).to_data().ToDoubles(), (std::vector<double>{1, 0, 1, 1}));
  EXPECT_EQ(x.argmax(-1, true).shape(), Shape({2, 1}));
  EXPECT_EQ(x.argmax().template item<int64_t>(), 4);
  EXPECT_EQ(x.transpose(0, 1).argmax(1).to_data().ToDoubles(), (std::vector<double>{1, 0, 1, 1}));
}

TYPED_TEST(Reduce, ArgmaxMatchesReferenceOnRandomData) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({7, 6, 5});
  const Ref r = this->R(x);
  for (int64_t dim = 0; dim < 3; ++dim) {
    const Tn got = x.argmax(dim);
    const auto v = got.to_data().ToDoubles();
    // The element at the returned index equals the reference maximum.
    const Ref maxima = kiln::testing::Reduce(r, {dim}, false, RefReduce::kMax);
    for (int64_t i = 0; i < maxima.numel(); ++i) {
      Index idx = Unravel(i, maxima.shape);
      idx.insert(idx.begin() + dim, static_cast<int64_t>(v[i]));
      EXPECT_EQ(r.v[Ravel(idx, r.shape)], maxima.v[i]);
    }
  }
}

TYPED_TEST(Reduce, SoftmaxAndLogSoftmaxAreStable) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({4, 7}, -3, 3);
  for (int64_t dim : {0, 1, -1}) {
    this->ExpectClose(x.softmax(dim), Softmax(this->R(x), dim < 0 ? dim + 2 : dim, false), 8);
    this->ExpectClose(x.log_softmax(dim), Softmax(this->R(x), dim < 0 ? dim + 2 : dim, true), 8);
  }
  // Logits of 1000 overflow exp() unless the maximum is subtracted first.
  const Tn big = x * 300;
  for (double v : big.softmax(1).to_data().ToDoubles()) EXPECT_TRUE(std::isfinite(v));
  for (double v : big.log_softmax(1).to_data().ToDoubles()) EXPECT_TRUE(std::isfinite(v));
  this->ExpectClose(big.softmax(1).sum({1}), Ref{{4}, {1, 1, 1, 1}}, 8);
}

}  // namespace
}  // namespace kiln::testing
