// bench/eigen_gpt_block_step.h against kiln's TransformerBlock: from the same weights, input
// and target, both give the same loss and gradients at every step and leave the same
// parameters after three AdamW steps, on one thread and on two.
#include "bench/eigen_gpt_block_step.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "autodiff/autodiff.h"
#include "backends/cpu/cpu_backend.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "nn/transformer_block.h"

namespace kiln {
namespace {

using AD = Autodiff<Cpu>;
using T = Tensor<AD>;
using Mat = bench::EigenGptBlockStep::Mat;

void CopyInto(const Tensor<Cpu>& from, Mat& to) {
  const TensorData data = from.to_data();
  const auto values = data.values<float>();
  ASSERT_EQ(static_cast<Eigen::Index>(values.size()), to.size()) << from.Describe();
  std::copy(values.begin(), values.end(), to.data());
}

// Largest |a - b| and largest |a|.
struct Gap {
  float diff = 0, scale = 0;
};
Gap Compare(const Tensor<Cpu>& kiln, const Mat& eigen) {
  const TensorData data = kiln.to_data();
  const auto values = data.values<float>();
  EXPECT_EQ(static_cast<Eigen::Index>(values.size()), eigen.size()) << kiln.Describe();
  Gap gap;
  for (size_t i = 0; i < values.size() && static_cast<Eigen::Index>(i) < eigen.size(); ++i) {
    gap.diff = std::max(gap.diff, std::abs(values[i] - eigen.data()[i]));
    gap.scale = std::max(gap.scale, std::abs(values[i]));
  }
  return gap;
}

class EigenGptBlockStepTest : public testing::TestWithParam<int> {};  // the Eigen step's threads

TEST_P(EigenGptBlockStepTest, MatchesKilnsBlock) {
  ASSERT_TRUE(cpu::Configure({.devices = 1, .threads_per_device = 2}).ok());
  // examples/gpt's block, with 3 sequences (an odd count, so threads split unevenly).
  constexpr bench::GptBlockShape shape{.batch = 3, .seq = 64, .width = 128, .heads = 4};
  Generator gen(7);
  nn::TransformerBlock<AD> block(shape.width, shape.heads, gen,
                                 {.init_std = 0.02, .residual_init_std = 0.02 / std::sqrt(2.0)});
  const T x = T::normal({shape.batch, shape.seq, shape.width}, 0, 1, gen);
  const T target = T::normal({shape.batch, shape.seq, shape.width}, 0, 1, gen);
  const bench::GptBlockAdamW settings;
  nn::AdamW<Cpu> adamw(settings.lr, {.beta1 = settings.beta1,
                                     .beta2 = settings.beta2,
                                     .eps = settings.eps,
                                     .weight_decay = settings.weight_decay,
                                     .decays = nn::DecayOnlyMatrices});

  bench::EigenGptBlockStep eigen(shape, settings, GetParam());
  const auto params = block.named_parameters();
  ASSERT_EQ(params.size(), eigen.params().size());
  for (const auto& [path, p] : params) {
    ASSERT_NE(eigen.param(path), nullptr) << path;
    CopyInto(p->inner(), eigen.param(path)->value);
  }
  CopyInto(x.inner(), eigen.input());
  CopyInto(target.inner(), eigen.target());

  for (int step = 0; step < 3; ++step) {
    const T loss = nn::MeanSquaredError(block(x), target);
    const Gradients<Cpu> grads = loss.backward();
    const float kiln_loss = loss.item<float>();
    EXPECT_NEAR(eigen.Step(), kiln_loss, 1e-5 * kiln_loss) << "step " << step;
    for (const auto& [path, p] : params) {
      const Gap gap = Compare(*grads.get(*p), eigen.param(path)->grad);
      // Relative to the tensor's largest gradient: attn.qkv.bias's key part is zero but for
      // rounding (softmax ignores a shift shared by a row's scores).
      EXPECT_LE(gap.diff, 1e-4 * gap.scale) << path << " gradient, step " << step;
    }
    adamw.step(block, grads);
  }
  for (const auto& [path, p] : params) {
    const Gap gap = Compare(p->inner(), eigen.param(path)->value);
    // Weights of ~0.1 and norm scales of ~1, each moved ~3e-3 by AdamW.
    EXPECT_LE(gap.diff, 1e-5) << path;
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, EigenGptBlockStepTest, testing::Values(1, 2));

}  // namespace
}  // namespace kiln
