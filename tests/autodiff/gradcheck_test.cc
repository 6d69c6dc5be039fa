// Every differentiable op against finite differences, on every backend through Autodiff, plus
// composite graphs (MLP loss, diamond, residual, shared weights).
#include "tests/autodiff/gradcheck.h"

#include "tensor/fused.h"
#include "tests/backends.h"

namespace kiln::testing {
namespace {

template <class B>
class GradCheckTest : public ::testing::Test {
 protected:
  void SetUp() override { KILN_SKIP_IF_UNAVAILABLE(B); }
  using AD = Tensor<Autodiff<B>>;
  using Args = std::vector<AD>;
  // Against finite differences in f64, then (where B has half kernels) in bf16 and f16
  // against the f64 gradients.
  static void Check(const AdFn<B>& f, const std::vector<TensorData>& inputs, double roundings = 8) {
    GradCheck<B>(f, inputs);
    if constexpr (kHasHalf<B>) {
      for (DType half : {DType::kBF16, DType::kF16}) HalfGradCheck<B>(f, inputs, half, roundings);
    }
  }
};
TYPED_TEST_SUITE(GradCheckTest, InnerBackends, ConfigNames);

TYPED_TEST(GradCheckTest, UnaryOps) {
  using Args = typename TestFixture::Args;
  const auto x = Uniform({3, 4}, -2, 2, 1);
  const auto pos = Uniform({3, 4}, 0.2, 3, 2);
  this->Check([](const Args& a) { return a[0].neg(); }, {x});
  this->Check([](const Args& a) { return a[0].abs(); }, {x});
  this->Check([](const Args& a) { return a[0].exp(); }, {x});
  this->Check([](const Args& a) { return a[0].log(); }, {pos});
  this->Check([](const Args& a) { return a[0].sqrt(); }, {pos});
  this->Check([](const Args& a) { return a[0].tanh(); }, {x});
  this->Check([](const Args& a) { return a[0].sigmoid(); }, {x});
  this->Check([](const Args& a) { return a[0].relu(); }, {x});
  this->Check([](const Args& a) { return a[0].erf(); }, {x});
  this->Check([](const Args& a) { return a[0].clamp(-0.5, 1.0); }, {x});
}

TYPED_TEST(GradCheckTest, BinaryOpsWithBroadcasting) {
  using Args = typename TestFixture::Args;
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 3}}, {{4, 1, 3}, {2, 1}}, {{}, {2, 2}}};
  for (const auto& [sa, sb] : shapes) {
    SCOPED_TRACE(sa.ToString() + " " + sb.ToString());
    const auto a = Uniform(sa, 0.5, 2, 3), b = Uniform(sb, 0.5, 2, 4);
    this->Check([](const Args& v) { return v[0] + v[1]; }, {a, b});
    this->Check([](const Args& v) { return v[0] - v[1]; }, {a, b});
    this->Check([](const Args& v) { return v[0] * v[1]; }, {a, b});
    this->Check([](const Args& v) { return v[0] / v[1]; }, {a, b});
    this->Check([](const Args& v) { return v[0].pow(v[1]); }, {a, b});
    this->Check([](const Args& v) { return v[0].maximum(v[1]); }, {a, b});
    this->Check([](const Args& v) { return v[0].minimum(v[1]); }, {a, b});
  }
  const auto x = Uniform({5}, 0.5, 2, 5);
  this->Check([](const Args& v) { return v[0].pow(3) + 2 / v[0] - 1.5 * v[0] + (1 - v[0]); }, {x});
}

TYPED_TEST(GradCheckTest, WhereAndMaskedFill) {
  using Args = typename TestFixture::Args;
  const auto a = Uniform({3, 4}, -1, 1, 6), b = Uniform({4}, -1, 1, 7);
  this->Check([](const Args& v) { return TestFixture::AD::where(v[0].gt(0), v[0], v[1]); }, {a, b});
  this->Check([](const Args& v) { return v[0].masked_fill(v[0].lt(0), 3.0); }, {a});
}

TYPED_TEST(GradCheckTest, Reductions) {
  using Args = typename TestFixture::Args;
  const auto x = Uniform({3, 4, 5}, -2, 2, 8);
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{}, {0}, {1}, {2}, {0, 2}, {1, 2}}) {
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE(::testing::PrintToString(dims) + (keepdim ? " keepdim" : ""));
      this->Check([&](const Args& v) { return v[0].sum(dims, keepdim); }, {x});
      this->Check([&](const Args& v) { return v[0].mean(dims, keepdim); }, {x});
      this->Check([&](const Args& v) { return v[0].max(dims, keepdim); }, {x});
      this->Check([&](const Args& v) { return v[0].min(dims, keepdim); }, {x});
    }
  }
}

TYPED_TEST(GradCheckTest, TiedMaximaShareTheGradient) {
  using AD = typename TestFixture::AD;
  const AD x = AD::from_vector(std::vector<double>{1, 3, 3, 2}, {4}).require_grad();
  const auto grads = x.max().backward();
  EXPECT_EQ(grads.get(x)->to_data().ToDoubles(), (std::vector<double>{0, 0.5, 0.5, 0}));
}

TYPED_TEST(GradCheckTest, SoftmaxAndLogSoftmax) {
  using Args = typename TestFixture::Args;
  const auto x = Uniform({3, 5}, -3, 3, 9);
  this->Check([](const Args& v) { return v[0].softmax(1); }, {x});
  this->Check([](const Args& v) { return v[0].softmax(0); }, {x});
  this->Check([](const Args& v) { return v[0].log_softmax(1); }, {x});
  this->Check([](const Args& v) { return v[0].log_softmax(-2); }, {x});
}

TYPED_TEST(GradCheckTest, Matmul) {
  using Args = typename TestFixture::Args;
  const std::vector<std::pair<Shape, Shape>> shapes = {{{3, 4}, {4, 2}},    {{2, 3, 4}, {2, 4, 2}},
                                                       {{3, 4}, {2, 4, 2}}, {{2, 1, 3, 4}, {3, 4, 2}},
                                                       {{4}, {4, 3}},       {{3, 4}, {4}}};
  for (const auto& [sa, sb] : shapes) {
    SCOPED_TRACE(sa.ToString() + " x " + sb.ToString());
    this->Check([](const Args& v) { return v[0].matmul(v[1]); }, {Uniform(sa, -1, 1, 10), Uniform(sb, -1, 1, 11)});
  }
  // Through a transposed view.
  this->Check([](const Args& v) { return v[0].transpose(0, 1).matmul(v[1]); },
              {Uniform({4, 3}, -1, 1, 12), Uniform({4, 2}, -1, 1, 13)});
}

TYPED_TEST(GradCheckTest, LayoutOps) {
  using Args = typename TestFixture::Args;
  using AD = typename TestFixture::AD;
  const auto x = Uniform({3, 4}, -1, 1, 14);
  this->Check([](const Args& v) { return v[0].reshape({2, 6}); }, {x});
  this->Check([](const Args& v) { return v[0].transpose(0, 1) * 2; }, {x});
  this->Check([](const Args& v) { return v[0].unsqueeze(1).expand(Shape{3, 2, 4}); }, {x});
  this->Check([](const Args& v) { return v[0].slice(1, 1, 4); }, {x});
  this->Check([](const Args& v) { return v[0].slice(1, 0, 4, 3); }, {x});
  this->Check([](const Args& v) { return v[0].slice(0, -2, 3).slice(1, 1, 3); }, {x});
  const auto y = Uniform({3, 2}, -1, 1, 15);
  this->Check(
      [](const Args& v) {
        const std::vector<AD> parts = {v[0], v[1], v[0]};
        return AD::cat(parts, 1);
      },
      {x, y});
  this->Check(
      [](const Args& v) {
        const std::vector<AD> parts = {v[0], v[0] * 2};
        return AD::stack(parts, 0);
      },
      {x});
  this->Check(
      [](const Args& v) {
        return v[0].gather(1, AD::from_vector(std::vector<int64_t>{0, 3, 3, 1, 2, 2}, {3, 2}));
      },
      {x});
  this->Check(
      [](const Args& v) {
        return v[0].index_select(1, AD::from_vector(std::vector<int64_t>{3, 0, 3}, {3}));
      },
      {x});
  this->Check(
      [](const Args& v) {
        return v[0].scatter_add(1, AD::from_vector(std::vector<int64_t>{0, 0, 1, 2, 3, 3}, {3, 2}), v[1]);
      },
      {x, y});
  // Through f32 and back: linear, so a wide step is exact up to f32 rounding.
  GradCheck<TypeParam>([](const Args& v) { return v[0].to(DType::kF32).to(DType::kF64); }, {x}, 1e-2, 1e-5);
}

// ---- Composite graphs ---------------------------------------------------------------------

TYPED_TEST(GradCheckTest, MlpCrossEntropyLoss) {
  using Args = typename TestFixture::Args;
  using AD = typename TestFixture::AD;
  const auto labels = AD::from_vector(std::vector<int64_t>{2, 0, 1, 2}, {4, 1});
  this->Check(
      [&](const Args& v) {
        const AD hidden = (v[0].matmul(v[1]) + v[2]).tanh();
        const AD logits = hidden.matmul(v[3]);
        return -logits.log_softmax(1).gather(1, labels).mean();
      },
      {Uniform({4, 5}, -1, 1, 16), Uniform({5, 6}, -1, 1, 17), Uniform({6}, -1, 1, 18), Uniform({6, 3}, -1, 1, 19)});
}

TYPED_TEST(GradCheckTest, DiamondResidualAndSharedWeights) {
  using Args = typename TestFixture::Args;
  using AD = typename TestFixture::AD;
  const auto x = Uniform({3, 3}, -1, 1, 20), w = Uniform({3, 3}, -1, 1, 21);
  // Diamond: one tensor feeds two branches that meet again.
  this->Check(
      [](const Args& v) {
        const AD h = v[0].matmul(v[1]);
        const std::vector<AD> parts = {h * 2, h.exp()};
        return AD::cat(parts, 1);
      },
      {x, w});
  // Residual: W x + W.
  this->Check([](const Args& v) { return v[1].matmul(v[0]) + v[1]; }, {x, w});
  // Shared weights: the same W applied twice.
  this->Check([](const Args& v) { return v[1].matmul(v[1].matmul(v[0]).sigmoid()); }, {x, w});
}

TYPED_TEST(GradCheckTest, FusedOps) {
  using Args = typename TestFixture::Args;
  const auto x = Uniform({2, 3, 5}, -2, 2, 21);
  const auto w = Uniform({5}, 0.5, 1.5, 22), b = Uniform({5}, -1, 1, 23);
  this->Check([](const Args& a) { return fused::softmax_last(a[0], false, false); }, {x});
  this->Check([](const Args& a) { return fused::softmax_last(a[0], true, false); }, {x});
  this->Check([](const Args& a) { return fused::softmax_last(a[0], false, true); }, {x});
  this->Check([](const Args& a) { return fused::norm_last(a[0], &a[1], &a[2], 1e-5, false).y; }, {x, w, b});
  this->Check([](const Args& a) { return fused::norm_last(a[0], nullptr, nullptr, 1e-5, false).y; }, {x});
  this->Check([](const Args& a) { return fused::norm_last(a[0], &a[1], nullptr, 1e-6, true).y; }, {x, w});
  this->Check([](const Args& a) { return fused::gelu(a[0], false); }, {x});
  this->Check([](const Args& a) { return fused::gelu(a[0], true); }, {x});
  // Linear over rank-3 and rank-1 inputs, with and without its bias.
  const auto lw = Uniform({4, 5}, -1, 1, 27), lb = Uniform({4}, -1, 1, 28);
  this->Check([](const Args& a) { return fused::linear(a[0], a[1], &a[2]); }, {x, lw, lb});
  this->Check([](const Args& a) { return fused::linear(a[0], a[1], nullptr); }, {Uniform({5}, -1, 1, 29), lw});
  // Causal attention: two heads, and one head over more than one block of 64 queries.
  this->Check([](const Args& a) { return fused::causal_attention(a[0], 2).y; }, {Uniform({2, 4, 12}, -1, 1, 25)});
  this->Check([](const Args& a) { return fused::causal_attention(a[0], 1).y; }, {Uniform({1, 67, 3}, -1, 1, 26)});
  const auto logits = Uniform({4, 6}, -2, 2, 24);
  for (double s : {0.0, 0.2}) {
    this->Check(
        [s](const Args& a) {
          const auto ids = TestFixture::AD::from_vector(std::vector<int64_t>{5, -100, 0, 2}, {4});
          return fused::cross_entropy_rows(a[0], ids, -100, s).loss;
        },
        {logits});
  }
}

// A fused kernel's gradient is its composition's (the composition recorded op by op).
TYPED_TEST(GradCheckTest, FusedGradientsEqualTheirComposition) {
  using AD = typename TestFixture::AD;
  using Fn = std::function<AD(const AD&, bool composed)>;
  const AD w = AD::from_data(Uniform({7}, 0.5, 1.5, 31));
  const AD ids = AD::from_vector(std::vector<int64_t>{6, 0, -100, 3, 3, 1}, {6});
  const std::vector<std::pair<const char*, Fn>> cases = {
      {"log_softmax causal",
       [](const AD& x, bool c) {
         return c ? fused::composed::Softmax(x, true, true) : fused::softmax_last(x, true, true);
       }},
      {"layer_norm",
       [&](const AD& x, bool c) {
         return c ? fused::composed::Norm(x, &w, &w, 1e-5, false).y : fused::norm_last(x, &w, &w, 1e-5, false).y;
       }},
      {"gelu", [](const AD& x, bool c) { return c ? fused::composed::Gelu(x, false) : fused::gelu(x, false); }},
      {"cross_entropy", [&](const AD& x, bool c) {
         return c ? fused::composed::CrossEntropyRows(x, ids, -100, 0.1).loss
                  : fused::cross_entropy_rows(x, ids, -100, 0.1).loss;
       }}};
  for (const auto& [name, f] : cases) {
    SCOPED_TRACE(name);
    const AD x = AD::from_data(Uniform({6, 7}, -2, 2, 32)).require_grad();
    const AD r = AD::from_data(Uniform({6, 7}, 0.5, 1.5, 33));
    const auto weight = [&](const AD& y) {
      return y.rank() == 1 ? y * r.sum({1}) : y.masked_fill(y.eq(-INFINITY), 0) * r;
    };
    const auto fused_grad = *weight(f(x, false)).sum().backward().get(x);
    const auto composed_grad = *weight(f(x, true)).sum().backward().get(x);
    const std::vector<double> got = fused_grad.to_data().ToDoubles(), want = composed_grad.to_data().ToDoubles();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << i;
  }
}

}  // namespace
}  // namespace kiln::testing
