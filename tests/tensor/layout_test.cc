// Conformance: reshape, permute, slice, expand, cat, stack, gather, index_select, one_hot.
#include "tests/tensor/conformance.h"

namespace kiln::testing {
namespace {

template <class C>
class Layout : public Conformance<C> {};
TYPED_TEST_SUITE(Layout, FloatConfigs, ConfigNames);

TYPED_TEST(Layout, ReshapeInfersOneDim) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({2, 3, 4});
  const Tn y = x.reshape({4, -1});
  EXPECT_EQ(y.shape(), Shape({4, 6}));
  this->ExpectExact(y, Ref{{4, 6}, this->R(x).v});
  // A view that is not contiguous is copied before it is reshaped.
  const Tn t = x.transpose(0, 2).reshape({-1});
  this->ExpectExact(t, Ref{{24}, Permute(this->R(x), {2, 1, 0}).v});
  EXPECT_EQ(x.reshape({24}).reshape({2, 12}).shape(), Shape({2, 12}));
  EXPECT_EQ(Tn::zeros({0, 4}).reshape({-1, 2}).shape(), Shape({0, 2}));
}

TYPED_TEST(Layout, PermuteTransposeSqueeze) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({2, 3, 4});
  this->ExpectExact(x.permute({1, 2, 0}), Permute(this->R(x), {1, 2, 0}));
  this->ExpectExact(x.permute({-1, 0, 1}), Permute(this->R(x), {2, 0, 1}));
  this->ExpectExact(x.transpose(0, -1), Permute(this->R(x), {2, 1, 0}));
  EXPECT_EQ(x.unsqueeze(0).shape(), Shape({1, 2, 3, 4}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), Shape({2, 3, 4, 1}));
  EXPECT_EQ(x.unsqueeze(1).squeeze(1).shape(), x.shape());
  // Permutations compose: applying the inverse gives the original values back.
  this->ExpectExact(x.permute({1, 2, 0}).permute({2, 0, 1}), this->R(x));
}

TYPED_TEST(Layout, SliceClampsLikePython) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({5, 6});
  const Ref r = this->R(x);
  this->ExpectExact(x.slice(1, 1, 4), Slice(r, 1, 1, 4, 1));
  this->ExpectExact(x.slice(0, -2, 100), Slice(r, 0, 3, 5, 1));
  this->ExpectExact(x.slice(1, 0, 6, 2), Slice(r, 1, 0, 6, 2));
  this->ExpectExact(x.slice(1, 1, 6, 3), Slice(r, 1, 1, 6, 3));
  this->ExpectExact(x.slice(0, 4, 2), Slice(r, 0, 4, 4, 1));  // empty
  EXPECT_EQ(x.slice(0, 4, 2).shape(), Shape({0, 6}));
  // Slices of slices and of transposed views.
  this->ExpectExact(x.slice(1, 1, 5).slice(0, 1, 4, 2), Slice(Slice(r, 1, 1, 5, 1), 0, 1, 4, 2));
  this->ExpectExact(x.transpose(0, 1).slice(0, 2, 4), Slice(Permute(r, {1, 0}), 0, 2, 4, 1));
  // Element-wise math on a sliced view.
  this->ExpectClose(x.slice(1, 0, 6, 2) * 2, Map(Slice(r, 1, 0, 6, 2), [](double v) { return 2 * v; }));
}

TYPED_TEST(Layout, ExpandRepeatsWithoutCopying) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({3, 1});
  const Tn e = x.expand(Shape{2, 3, 4});
  Ref want = Make({2, 3, 4});
  for (int64_t i = 0; i < 24; ++i) want.v[i] = this->R(x).v[Unravel(i, {2, 3, 4})[1]];
  this->ExpectExact(e, want);
  this->ExpectClose(e + 1, Map(want, [](double v) { return v + 1; }));
  this->ExpectExact(e.sum({0}), Map(Reduce(want, {0}, false, RefReduce::kSum), [](double v) { return v; }));
}

TYPED_TEST(Layout, CatAndStack) {
  using Tn = typename TestFixture::Tn;
  const Tn a = this->Random({2, 3}, -1, 1, 1);
  const Tn b = this->Random({2, 5}, -1, 1, 2);
  const Tn c = this->Random({2, 1}, -1, 1, 3);
  const std::vector<Tn> parts = {a, this->Strided(b), c};
  const Tn joined = Tn::cat(parts, 1);
  EXPECT_EQ(joined.shape(), Shape({2, 9}));
  this->ExpectExact(joined.slice(1, 0, 3), this->R(a));
  this->ExpectExact(joined.slice(1, 3, 8), this->R(b));
  this->ExpectExact(joined.slice(1, 8, 9), this->R(c));
  const std::vector<Tn> rows = {a, a.neg(), Tn::zeros({0, 3}, this->kDType)};
  const Tn down = Tn::cat(rows, 0);
  EXPECT_EQ(down.shape(), Shape({4, 3}));
  this->ExpectExact(down.slice(0, 2, 4), Map(this->R(a), [](double v) { return -v; }));

  const std::vector<Tn> same = {a, a * 2, a * 3};
  const Tn stacked = Tn::stack(same, 1);
  EXPECT_EQ(stacked.shape(), Shape({2, 3, 3}));
  this->ExpectClose(stacked.slice(1, 2, 3).squeeze(1), Map(this->R(a), [](double v) { return 3 * v; }));
  EXPECT_EQ(Tn::stack(same, -1).shape(), Shape({2, 3, 3}));
  EXPECT_EQ(Tn::stack(same, 0).shape(), Shape({3, 2, 3}));
}

TYPED_TEST(Layout, GatherPicksAlongADim) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({3, 4});
  const Ref r = this->R(x);
  const Tn idx = Tn::from_vector(std::vector<int64_t>{3, 0, 1, 1, 2, 2}, {3, 2});
  // out[i][j] = x[i][idx[i][j]]
  Ref want = Make({3, 2});
  const std::vector<int64_t> iv = {3, 0, 1, 1, 2, 2};
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 2; ++j) want.v[i * 2 + j] = r.v[i * 4 + iv[i * 2 + j]];
  }
  this->ExpectExact(x.gather(1, idx), want);
  // Along dim 0 with an i32 index: out[i][j] = x[idx[i][j]][j]
  const Tn idx0 = Tn::from_vector(std::vector<int32_t>{2, 0, 1, 2, 0, 0, 0, 1}, {2, 4});
  const std::vector<int64_t> i0 = {2, 0, 1, 2, 0, 0, 0, 1};
  Ref want0 = Make({2, 4});
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 4; ++j) want0.v[i * 4 + j] = r.v[i0[i * 4 + j] * 4 + j];
  }
  this->ExpectExact(x.gather(0, idx0), want0);
  this->ExpectExact(x.transpose(0, 1).gather(1, idx0.transpose(0, 1)), Permute(want0, {1, 0}));
}

TYPED_TEST(Layout, ScatterAddIsTheAdjointOfGather) {
  using Tn = typename TestFixture::Tn;
  const Tn base = this->Random({3, 4}, -1, 1, 1);
  const Tn src = this->Random({3, 2}, -1, 1, 2);
  const std::vector<int64_t> iv = {3, 3, 0, 1, 2, 0};  // row 0 adds twice into column 3
  const Tn idx = Tn::from_vector(iv, {3, 2});
  Ref want = this->R(base);
  const Ref rs = this->R(src);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 2; ++j) want.v[i * 4 + iv[i * 2 + j]] += rs.v[i * 2 + j];
  }
  this->ExpectClose(base.scatter_add(1, idx, src), want);
  // <gather(x), y> == <x, scatter_add(y)> for any x, y.
  const Tn x = this->Random({3, 4}, -1, 1, 3);
  const double lhs = (x.gather(1, idx) * src).sum().template item<double>();
  const double rhs = (x * Tn::zeros({3, 4}, this->kDType).scatter_add(1, idx, src)).sum().template item<double>();
  EXPECT_NEAR(lhs, rhs, 1e-5);
}

TYPED_TEST(Layout, IndexSelectAndOneHot) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({4, 3});
  const Tn idx = Tn::from_vector(std::vector<int64_t>{3, 3, 0}, {3});
  const Tn rows = x.index_select(0, idx);
  const Tn cols = x.index_select(1, idx.slice(0, 2, 3));
  const Ref r = this->R(x);
  this->ExpectExact(rows, Ref{{3, 3}, {r.v[9], r.v[10], r.v[11], r.v[9], r.v[10], r.v[11], r.v[0], r.v[1], r.v[2]}});
  this->ExpectExact(cols, Ref{{4, 1}, {r.v[0], r.v[3], r.v[6], r.v[9]}});
  this->ExpectExact(x.transpose(0, 1).index_select(1, idx), Permute(Ref::Of(rows.to_data()), {1, 0}));

  const Tn labels = Tn::from_vector(std::vector<int32_t>{2, 0, 1, 2}, {4});
  const Tn hot = labels.one_hot(3, this->kDType);
  EXPECT_EQ(hot.dtype(), this->kDType);
  this->ExpectExact(hot, Ref{{4, 3}, {0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1}});
  EXPECT_EQ(Tn::zeros({0}, DType::kI64).one_hot(5).shape(), Shape({0, 5}));
}

}  // namespace
}  // namespace kiln::testing
