// Mixed precision (nn/precision.h): under a bf16 or f16 policy the matmul layers compute in the
// half type, norms and losses in f32, and every gradient reaches its f32 parameter in f32.
#include "nn/precision.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autodiff/autodiff.h"
#include "backends/cpu/cpu_backend.h"
#include "nn/gpt.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/norm.h"
#include "nn/sequential.h"

namespace kiln::nn {
namespace {

using AD = Autodiff<Cpu>;
using T = Tensor<AD>;

double UnitRoundoff(DType d) { return d == DType::kBF16 ? 0x1p-8 : 0x1p-11; }

double Rounded(double x, DType d) {
  return d == DType::kBF16 ? static_cast<float>(BFloat16(x)) : static_cast<float>(Float16(x));
}

TEST(Precision, ParsesItsNames) {
  EXPECT_EQ(*ParsePrecision("bf16"), Precision::kBF16);
  EXPECT_EQ(*ParsePrecision("f16"), Precision::kF16);
  EXPECT_EQ(*ParsePrecision("f32"), Precision::kF32);
  EXPECT_EQ(ParsePrecision("fp16").status().message(), "precision \"fp16\" is not one of f32, bf16, f16");
  EXPECT_EQ(ComputeDType(Precision::kF32), std::nullopt);
}

// Linear under a half policy: the product of the rounded input and weight, summed in f32 and
// rounded once; the weight's gradient in f32, equal to the f64 gradient through the same
// roundings within a few unit roundoffs.
TEST(Precision, LinearComputesInTheHalfTypeAndGradientsArriveInF32) {
  for (Precision p : {Precision::kBF16, Precision::kF16}) {
    const DType half = *ComputeDType(p);
    SCOPED_TRACE(PrecisionName(p));
    Generator gen(1);
    Linear<AD> layer(16, 8, gen);
    SetPrecision(layer, p);
    const T x = T::uniform({4, 16}, -1, 1, gen).require_grad();
    const T y = layer(x);
    ASSERT_EQ(y.dtype(), half);
    const T loss = MeanSquaredError(y, T::zeros({4, 8}));
    ASSERT_EQ(loss.dtype(), DType::kF32);
    const auto grads = loss.backward();
    const auto gw = grads.get(layer.weight());
    ASSERT_TRUE(gw.has_value());
    EXPECT_EQ(gw->dtype(), DType::kF32);
    EXPECT_EQ(grads.get(x)->dtype(), DType::kF32);

    // The reference in double over the rounded operands.
    const auto xv = x.to_data().ToDoubles(), wv = layer.weight().to_data().ToDoubles();
    const auto yv = y.to_data().ToDoubles();
    std::vector<double> want(32), dy(32);
    for (int i = 0; i < 4; ++i) {
      for (int o = 0; o < 8; ++o) {
        double acc = 0;
        for (int k = 0; k < 16; ++k) acc += Rounded(xv[i * 16 + k], half) * Rounded(wv[o * 16 + k], half);
        want[i * 8 + o] = acc;
        EXPECT_NEAR(yv[i * 8 + o], acc, 2 * UnitRoundoff(half) * (1 + std::abs(acc)));
        dy[i * 8 + o] = Rounded(2 * yv[i * 8 + o] / 32, half);  // d mean(y^2) / dy, rounded as it travels
      }
    }
    const auto gv = gw->to_data().ToDoubles();
    for (int o = 0; o < 8; ++o) {
      for (int k = 0; k < 16; ++k) {
        double acc = 0;
        for (int i = 0; i < 4; ++i) acc += dy[i * 8 + o] * Rounded(xv[i * 16 + k], half);
        EXPECT_NEAR(gv[o * 16 + k], acc, 4 * UnitRoundoff(half) * (1 + std::abs(acc))) << o << "," << k;
      }
    }
  }
}

// Norms under a policy take the half activations in f32 and return f32; a clone (a replica)
// keeps the policy.
TEST(Precision, NormsComputeInF32AndClonesKeepThePolicy) {
  Generator gen(2);
  Sequential<AD> model;
  model.add(std::make_unique<Linear<AD>>(8, 8, gen)).add(std::make_unique<LayerNorm<AD>>(Dims{8}));
  SetPrecision(model, Precision::kBF16);
  const T x = T::uniform({3, 8}, -1, 1, gen);
  EXPECT_EQ(model(x).dtype(), DType::kF32);
  const auto copy = model.clone_to(CpuDevice(0));
  EXPECT_EQ(copy->compute_dtype(), DType::kBF16);
  EXPECT_EQ((*copy)(x).to_data().ToDoubles(), model(x).to_data().ToDoubles());
  SetPrecision(model, Precision::kF32);
  EXPECT_EQ(model.compute_dtype(), std::nullopt);
}

// A GPT under bf16: logits in bf16, the loss in f32 and within bf16 tolerance of the f32
// model's, every gradient f32 and close to the f32 model's.
TEST(Precision, GptTrainsUnderBf16WithF32MasterWeights) {
  Generator gen(3);
  Gpt<AD> model(GptConfig{.vocab = 32, .context = 8, .layers = 2, .heads = 2, .width = 16}, gen);
  const auto half = model.clone();
  SetPrecision(*half, Precision::kBF16);
  Generator data(4);
  const T ids = T::uniform({2, 8}, 0, 32, data).to(DType::kI64);
  const T targets = T::uniform({16}, 0, 32, data).to(DType::kI64);
  const T logits = (*half)(ids);
  EXPECT_EQ(logits.dtype(), DType::kBF16);
  const T loss = functional::cross_entropy(logits.reshape({16, 32}), targets);
  EXPECT_EQ(loss.dtype(), DType::kF32);
  const T reference = functional::cross_entropy(model(ids).reshape({16, 32}), targets);
  const double l = loss.item<double>(), r = reference.item<double>();
  EXPECT_NEAR(l, r, 0.02 * r);
  const auto grads = loss.backward();
  const auto ref_grads = reference.backward();
  auto params = half->named_parameters(), ref_params = model.named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE(params[i].first);
    const auto g = grads.get(*params[i].second);
    ASSERT_TRUE(g.has_value());
    EXPECT_EQ(g->dtype(), DType::kF32);
    const auto gv = g->to_data().ToDoubles(), rv = ref_grads.get(*ref_params[i].second)->to_data().ToDoubles();
    double err = 0, norm = 0;
    for (size_t j = 0; j < gv.size(); ++j) {
      err += (gv[j] - rv[j]) * (gv[j] - rv[j]);
      norm += rv[j] * rv[j];
    }
    // Relative L2 error of the whole gradient: bf16 rounding through two blocks, a few percent.
    EXPECT_LT(std::sqrt(err), 0.08 * std::sqrt(norm) + 1e-6);
  }
}

}  // namespace
}  // namespace kiln::nn
