// CausalSelfAttention and TransformerBlock: attention against a head-by-head computation that
// takes another path (column slices, no reshape/permute), causality, gradients against finite
// differences, PyTorch-like parameter names, and bad input named.
#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "nn/attention.h"
#include "nn/transformer_block.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln::nn {
namespace {

using kiln::testing::GradCheck;
using kiln::testing::Uniform;
using AD = Autodiff<Cpu>;
using T = Tensor<AD>;
using Args = std::vector<T>;

std::vector<double> V(const T& t) { return t.to_data().ToDoubles(); }

T Param(Module<AD>& m, const std::string& name) {
  for (auto& [n, p] : m.named_parameters()) {
    if (n == name) return *p;
  }
  ADD_FAILURE() << "no parameter " << name;
  return T();
}

TEST(CausalSelfAttention, IsEveryHeadsAttentionConcatenatedAndProjected) {
  Generator gen(21);
  const int64_t b = 2, s = 5, d = 6, heads = 3, hd = 2;
  CausalSelfAttention<AD> attn(d, heads, gen, {.dtype = DType::kF64});
  const T x = T::from_data(Uniform({b, s, d}, -1, 1, 22));
  const T w = Param(attn, "qkv.weight"), bias = Param(attn, "qkv.bias");
  std::vector<T> parts;  // q, k, v: [b, s, d] each, rows of the fused weight
  for (int i = 0; i < 3; ++i) {
    const T wi = w.slice(0, i * d, (i + 1) * d), bi = bias.slice(0, i * d, (i + 1) * d);
    parts.push_back(functional::linear(x, wi, &bi));
  }
  std::vector<T> per_head;
  for (int h = 0; h < heads; ++h) {
    auto head = [&](const T& t) { return t.slice(2, h * hd, (h + 1) * hd).unsqueeze(1); };  // [b, 1, s, hd]
    per_head.push_back(
        functional::scaled_dot_product_attention(head(parts[0]), head(parts[1]), head(parts[2]), {.causal = true})
            .squeeze(1));
  }
  const T proj_w = Param(attn, "proj.weight"), proj_b = Param(attn, "proj.bias");
  const T want = functional::linear(T::cat(per_head, 2), proj_w, &proj_b);
  const auto got = V(attn(x)), expected = V(want);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-12) << i;
}

TEST(CausalSelfAttention, APositionSeesNothingAfterIt) {
  Generator gen(23);
  CausalSelfAttention<AD> attn(4, 2, gen, {.dtype = DType::kF64});
  TensorData x = Uniform({1, 4, 4}, -1, 1, 24);
  const auto before = V(attn(T::from_data(x)));
  for (int j = 12; j < 16; ++j) x.mutable_values<double>()[j] += 5;  // the last position changes
  const auto after = V(attn(T::from_data(x)));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(before[i], after[i]) << i;
  bool changed = false;
  for (int i = 12; i < 16; ++i) changed = changed || before[i] != after[i];
  EXPECT_TRUE(changed);
}

TEST(CausalSelfAttention, BadShapesAreNamed) {
  Generator gen(25);
  try {
    CausalSelfAttention<AD>(6, 4, gen);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(), "CausalSelfAttention: 4 heads do not divide the width 6");
  }
  CausalSelfAttention<AD> attn(4, 2, gen);
  try {
    (void)attn(T::zeros({2, 3, 5}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(), "CausalSelfAttention(4): input f32[2,3,5] on cpu:0 must be [batch, seq, 4]");
  }
}

TEST(TransformerBlock, GradientsAndNames) {
  Generator gen(26);
  TransformerBlock<AD> block(4, 2, gen, {.dtype = DType::kF64});
  std::vector<std::string> names;
  for (auto& [name, p] : block.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias",
                                             "attn.proj.weight", "attn.proj.bias", "ln_2.weight", "ln_2.bias",
                                             "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias"}));
  GradCheck<Cpu>([&](const Args& a) { return block(a[0]); }, {Uniform({2, 3, 4}, -1, 1, 27)}, 1e-6, 1e-6);
  // Every parameter gets a gradient.
  const auto grads = block(T::from_data(Uniform({2, 3, 4}, -1, 1, 28))).sum().backward();
  for (auto& [name, p] : block.named_parameters()) EXPECT_TRUE(grads.contains(*p)) << name;
}

}  // namespace
}  // namespace kiln::nn
