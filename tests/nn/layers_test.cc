// Layers against independent references, their gradients against finite differences, and
// module mechanics (parameter paths, cloning, train/eval).
#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "nn/activation.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln::nn {
namespace {

using kiln::testing::GradCheck;
using kiln::testing::Uniform;
using AD = Autodiff<Cpu>;
using T = Tensor<AD>;
using Args = std::vector<T>;

std::vector<double> V(const T& t) { return t.to_data().ToDoubles(); }

// Direct convolution, loop by loop.
std::vector<double> ReferenceConv(const TensorData& x, const TensorData& w, int64_t stride, int64_t pad) {
  const auto xs = x.shape(), ws = w.shape();
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], o = ws[0], k = ws[2];
  const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (wd + 2 * pad - k) / stride + 1;
  const auto xv = x.ToDoubles(), wv = w.ToDoubles();
  std::vector<double> out(n * o * oh * ow, 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t f = 0; f < o; ++f)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          double acc = 0;
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t i = 0; i < k; ++i)
              for (int64_t j = 0; j < k; ++j) {
                const int64_t iy = y * stride + i - pad, ix = z * stride + j - pad;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += xv[((b * c + ch) * h + iy) * wd + ix] * wv[((f * c + ch) * k + i) * k + j];
              }
          out[((b * o + f) * oh + y) * ow + z] = acc;
        }
  return out;
}

TEST(Conv2d, MatchesDirectConvolution) {
  for (const auto& [stride, pad] : std::vector<std::pair<int64_t, int64_t>>{{1, 0}, {1, 1}, {2, 1}, {2, 0}}) {
    SCOPED_TRACE(::testing::PrintToString(std::make_pair(stride, pad)));
    Generator gen(1);
    Conv2d<AD> conv(3, 4, 3, gen, {.stride = stride, .padding = pad, .bias = false, .dtype = DType::kF64});
    const TensorData x = Uniform({2, 3, 7, 6}, -1, 1, 2);
    const T y = conv(T::from_data(x));
    const auto want = ReferenceConv(x, conv.named_parameters()[0].second->to_data(), stride, pad);
    const auto got = V(y);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
  }
}

TEST(Conv2d, GradientsMatchFiniteDifferences) {
  Generator gen(3);
  Conv2d<AD> conv(2, 3, 3, gen, {.stride = 2, .padding = 1, .dtype = DType::kF64});
  const TensorData w = conv.named_parameters()[0].second->to_data();
  GradCheck<Cpu>(
      [&](const Args& v) {
        // Same computation with the weight and bias as inputs.
        auto params = conv.named_parameters();
        *params[0].second = v[1];
        *params[1].second = v[2];
        return conv(v[0]);
      },
      {Uniform({2, 2, 5, 5}, -1, 1, 4), w, Uniform({3}, -1, 1, 5)});
}

TEST(MaxPool2d, MatchesWindowsAndRoutesGradients) {
  const T x = T::from_vector(std::vector<double>{1, 5, 2, 0, 3, 4, 8, 1, 0, 2, 9, 7, 6, 1, 3, 2}, {1, 1, 4, 4});
  EXPECT_EQ(V(MaxPool2d<AD>(2)(x)), (std::vector<double>{5, 8, 6, 9}));
  EXPECT_EQ(V(MaxPool2d<AD>(2, 1)(x)), (std::vector<double>{5, 8, 8, 4, 9, 9, 6, 9, 9}));
  EXPECT_EQ(MaxPool2d<AD>(3)(x).shape(), Shape({1, 1, 1, 1}));  // the remainder is dropped
  GradCheck<Cpu>([](const Args& v) { return MaxPool2d<AD>(2)(v[0]); }, {Uniform({2, 3, 4, 5}, -1, 1, 6)});
  GradCheck<Cpu>([](const Args& v) { return MaxPool2d<AD>(3, 2)(v[0]); }, {Uniform({1, 2, 5, 5}, -1, 1, 7)});
}

TEST(Linear, IsXTimesWeightTransposedPlusBias) {
  Generator gen(8);
  Linear<AD> fc(3, 2, gen, {.dtype = DType::kF64});
  auto params = fc.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[0].second->shape(), Shape({2, 3}));
  *params[1].second = params[1].second->with_value(Tensor<Cpu>::from_vector(std::vector<double>{1, -1}, {2}));
  const T x = T::from_vector(std::vector<double>{1, 2, 3}, {1, 3});
  const auto w = V(*params[0].second);
  EXPECT_NEAR(V(fc(x))[0], w[0] + 2 * w[1] + 3 * w[2] + 1, 1e-12);
  EXPECT_NEAR(V(fc(x))[1], w[3] + 2 * w[4] + 3 * w[5] - 1, 1e-12);
  // Kaiming-uniform init: |w| <= sqrt(6 / fan_in).
  for (double v : w) EXPECT_LE(std::abs(v), std::sqrt(6.0 / 3));
  EXPECT_THROW(fc(T::zeros({1, 4}, DType::kF64)), Error);
}

TEST(Init, BoundsAndDeterminism) {
  Generator g1(4), g2(4);
  const auto a = XavierUniform<Cpu>(Shape{50, 30}, 30, 50, g1, DType::kF64, CpuDevice());
  const auto b = XavierUniform<Cpu>(Shape{50, 30}, 30, 50, g2, DType::kF64, CpuDevice());
  EXPECT_EQ(a.to_data().ToDoubles(), b.to_data().ToDoubles());
  const double bound = std::sqrt(6.0 / 80);
  double max_abs = 0;
  for (double v : a.to_data().ToDoubles()) max_abs = std::max(max_abs, std::abs(v));
  EXPECT_LE(max_abs, bound);
  EXPECT_GT(max_abs, 0.9 * bound);  // and it fills the range
  const auto k = KaimingUniform<Cpu>(Shape{1000}, 24, g1, DType::kF32, CpuDevice());
  for (double v : k.to_data().ToDoubles()) EXPECT_LE(std::abs(v), 0.5 + 1e-7);  // sqrt(6 / 24)
}

TEST(Activations, GeluAndDropout) {
  const T x = T::from_vector(std::vector<double>{-2, -0.5, 0, 0.5, 2}, {5});
  const auto y = V(GELU<AD>()(x));
  for (size_t i = 0; i < y.size(); ++i) {
    const double v = V(x)[i];
    EXPECT_NEAR(y[i], 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))), 1e-12);
  }
  GradCheck<Cpu>([](const Args& v) { return GELU<AD>()(v[0]); }, {Uniform({6}, -3, 3, 9)});

  Dropout<AD> drop(0.25, 42);
  const T ones = T::ones({10000}, DType::kF64);
  const auto kept = V(drop(ones));
  int zeros = 0;
  for (double v : kept) {
    if (v == 0)
      ++zeros;
    else
      EXPECT_DOUBLE_EQ(v, 1 / 0.75);
  }
  EXPECT_NEAR(zeros / 10000.0, 0.25, 0.02);
  EXPECT_NE(V(drop(ones)), kept);                   // a new mask each call
  EXPECT_EQ(V(Dropout<AD>(0.25, 42)(ones)), kept);  // the seed fixes the masks
  drop.eval();
  EXPECT_EQ(V(drop(ones)), V(ones));
  EXPECT_THROW(Dropout<AD>(1.0, 1), Error);
}

std::unique_ptr<Sequential<AD>> SmallNet(Generator& gen) {
  auto net = std::make_unique<Sequential<AD>>();
  net->add<Linear<AD>>(4, 8, gen, LinearOptions{.dtype = DType::kF64})
      .add<ReLU<AD>>()
      .add<Dropout<AD>>(0.5, 1)
      .add<Linear<AD>>(8, 3, gen, LinearOptions{.dtype = DType::kF64});
  return net;
}

TEST(Module, ParametersAreNamedByPath) {
  Generator gen(10);
  auto net = SmallNet(gen);
  std::vector<std::string> names;
  for (auto& [name, p] : net->named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias"}));
  EXPECT_EQ(net->parameter_count(), 4 * 8 + 8 + 8 * 3 + 3);
  net->eval();
  EXPECT_FALSE(net->is_training());
}

TEST(Module, ClonesAreIndependentLeavesWithTheSameValues) {
  Generator gen(11);
  auto net = SmallNet(gen);
  net->eval();
  auto copy = net->clone();
  const T x = T::uniform({5, 4}, -1, 1, gen, DType::kF64);
  EXPECT_EQ(V((*net)(x)), V((*copy)(x)));
  auto a = net->named_parameters(), b = copy->named_parameters();
  // Gradients of the copy's loss belong to the copy's leaves only.
  const auto grads = (*copy)(x).sum().backward();
  EXPECT_FALSE(grads.get(*a[0].second).has_value());
  EXPECT_TRUE(grads.get(*b[0].second).has_value());
  ASSERT_TRUE(cpu::Configure({.devices = 2}).ok());
  auto moved = net->clone_to(CpuDevice(1));
  for (auto& [name, p] : moved->named_parameters()) {
    EXPECT_EQ(p->device(), CpuDevice(1)) << name;
    EXPECT_TRUE(p->requires_grad());
  }
  EXPECT_EQ(V((*moved)(x.to(CpuDevice(1)))), V((*net)(x)));
}

TEST(Loss, CrossEntropyAndMse) {
  const T logits = T::from_vector(std::vector<double>{2, 1, 0, 0, 0, 3}, {2, 3});
  const T labels = T::from_vector(std::vector<int64_t>{0, 2}, {2});
  const double l0 = -std::log(std::exp(2) / (std::exp(2) + std::exp(1) + 1));
  const double l1 = -std::log(std::exp(3) / (2 + std::exp(3)));
  EXPECT_NEAR(CrossEntropy(logits, labels).item<double>(), (l0 + l1) / 2, 1e-12);
  GradCheck<Cpu>([&](const Args& v) { return CrossEntropy(v[0], labels); }, {Uniform({2, 3}, -2, 2, 12)});
  EXPECT_THROW(CrossEntropy(logits, T::from_vector(std::vector<int64_t>{0, 3}, {2})), Error);
  const T a = T::from_vector(std::vector<double>{1, 2}, {2});
  const T b = T::from_vector(std::vector<double>{3, 2}, {2});
  EXPECT_EQ(MeanSquaredError(a, b).item<double>(), 2);
  GradCheck<Cpu>([&](const Args& v) { return MeanSquaredError(v[0], v[1]); },
                 {Uniform({3}, -1, 1, 13), Uniform({3}, -1, 1, 14)});
}

}  // namespace
}  // namespace kiln::nn
