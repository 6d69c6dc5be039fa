// Conformance: matmul in 1-D, 2-D and batched forms, with broadcasting and transposed views.
#include "tests/tensor/conformance.h"

namespace kiln::testing {
namespace {

template <class C>
class Matmul : public Conformance<C> {};
TYPED_TEST_SUITE(Matmul, FloatConfigs, ConfigNames);

TYPED_TEST(Matmul, TwoDimensional) {
  using Tn = typename TestFixture::Tn;
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> sizes = {{1, 1, 1}, {2, 3, 4},    {1, 7, 5},    {6, 7, 1},
                                                                    {5, 1, 6}, {33, 65, 17}, {130, 70, 90}};
  for (const auto& [m, k, n] : sizes) {
    SCOPED_TRACE(::testing::PrintToString(std::make_tuple(m, k, n)));
    const Tn a = this->Random({m, k}, -1, 1, 1);
    const Tn b = this->Random({k, n}, -1, 1, 2);
    const Ref want = kiln::testing::Matmul(this->R(a), this->R(b));
    this->ExpectClose(a.matmul(b), want, 4 * k);
    // Transposed views are read in place; strided ones are copied first.
    this->ExpectClose(this->Random({k, m}, -1, 1, 1).transpose(0, 1).matmul(b),
                      kiln::testing::Matmul(Permute(this->R(this->Random({k, m}, -1, 1, 1)), {1, 0}), this->R(b)),
                      4 * k);
    this->ExpectClose(this->Strided(a).matmul(this->Strided(b)), want, 4 * k);
    this->ExpectClose(a.matmul(b.transpose(0, 1).transpose(0, 1)), want, 4 * k);
  }
}

TYPED_TEST(Matmul, TransposedOperandsMatchReference) {
  using Tn = typename TestFixture::Tn;
  const Tn at = this->Random({40, 30}, -1, 1, 1);  // a = at^T: [30, 40]
  const Tn bt = this->Random({50, 40}, -1, 1, 2);  // b = bt^T: [40, 50]
  const Ref want = kiln::testing::Matmul(Permute(this->R(at), {1, 0}), Permute(this->R(bt), {1, 0}));
  this->ExpectClose(at.transpose(0, 1).matmul(bt.transpose(0, 1)), want, 160);
}

TYPED_TEST(Matmul, BatchedWithBroadcasting) {
  using Tn = typename TestFixture::Tn;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {2, 4, 5}}, {{3, 4}, {2, 4, 5}}, {{2, 3, 4}, {4, 5}}, {{2, 1, 3, 4}, {5, 4, 2}},
      {{1, 3, 4}, {6, 4, 2}}, {{0, 3, 4}, {4, 2}}, {{3, 0}, {0, 4}},    {{64, 20, 30}, {64, 30, 10}},
  };
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE(sa.ToString() + " x " + sb.ToString());
    const Tn a = this->Random(sa, -1, 1, 1);
    const Tn b = this->Random(sb, -1, 1, 2);
    this->ExpectClose(a.matmul(b), kiln::testing::Matmul(this->R(a), this->R(b)), 100);
  }
}

TYPED_TEST(Matmul, VectorsFollowNumPy) {
  using Tn = typename TestFixture::Tn;
  const Tn v = this->Random({4}, -1, 1, 1);
  const Tn m = this->Random({4, 3}, -1, 1, 2);
  const Tn w = this->Random({3}, -1, 1, 3);
  const Tn vm = v.matmul(m);
  EXPECT_EQ(vm.shape(), Shape({3}));
  Ref rv = this->R(v);
  rv.shape = {1, 4};
  Ref want = kiln::testing::Matmul(rv, this->R(m));
  want.shape = {3};
  this->ExpectClose(vm, want, 16);
  EXPECT_EQ(m.matmul(w).shape(), Shape({4}));
  EXPECT_EQ(v.matmul(v).shape(), Shape({}));
  Ref rr = this->R(v);
  double dot = 0;
  for (double x : rr.v) dot += x * x;
  this->ExpectClose(v.matmul(v), Ref{{}, {dot}}, 16);
}

TYPED_TEST(Matmul, LargeSquareUsesEveryThreadAndStaysExact) {
  using Tn = typename TestFixture::Tn;
  const Tn a = this->Random({256, 256}, -1, 1, 1);
  const Tn b = this->Random({256, 256}, -1, 1, 2);
  this->ExpectClose(a.matmul(b), kiln::testing::Matmul(this->R(a), this->R(b)), 1024);
}

}  // namespace
}  // namespace kiln::testing
