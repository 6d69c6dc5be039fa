// CausalSelfAttention and TransformerBlock: attention against a head-by-head computation that
// takes another path (column slices, no reshape/permute), causality, gradients against finite
// differences, PyTorch-like parameter names, and bad input named.
#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "nn/attention.h"
#include "nn/gpt.h"
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

// The head is the token embedding: one parameter, whose gradient sums both uses (checked by
// finite differences on the parameter itself), stored once.
TEST(Gpt, TiedEmbeddingGradientSumsBothUses) {
  Generator gen(29);
  Gpt<AD> gpt({.vocab = 7, .context = 4, .layers = 1, .heads = 2, .width = 4, .dtype = DType::kF64}, gen);
  int wte = 0;
  for (auto& [name, p] : gpt.named_parameters()) wte += name == "wte.weight";
  EXPECT_EQ(wte, 1);
  EXPECT_EQ(gpt.named_parameters().size(), 2 + 12 + 2u);  // wte, wpe, one block, ln_f
  const T ids = T::from_vector<int64_t>({1, 6, 6, 2, 0, 3}, {2, 3});
  const T targets = T::from_vector<int64_t>({6, 6, 2, 0, 3, 1}, {6});
  auto loss = [&] { return functional::cross_entropy(gpt(ids).reshape({-1, 7}), targets); };
  Tensor<AD>* weight = nullptr;
  for (auto& [name, p] : gpt.named_parameters()) {
    if (name == "wte.weight") weight = p;
  }
  const auto analytic = loss().backward().get(*weight)->to_data().ToDoubles();
  const TensorData base = weight->to_data();
  for (int64_t j = 0; j < base.numel(); j += 3) {
    auto at = [&](double delta) {
      TensorData moved = base;
      moved.mutable_values<double>()[j] += delta;
      *weight = weight->with_value(Tensor<Cpu>::from_data(moved));
      NoGradScope no_grad;
      return loss().item<double>();
    };
    const double numeric = (at(1e-6) - at(-1e-6)) / 2e-6;
    EXPECT_NEAR(analytic[j], numeric, 1e-6 * (1 + std::abs(numeric))) << j;
  }
  *weight = weight->with_value(Tensor<Cpu>::from_data(base));
}

TEST(Gpt, BadInputIsNamed) {
  Generator gen(30);
  Gpt<AD> gpt({.vocab = 7, .context = 4, .layers = 1, .heads = 2, .width = 4}, gen);
  auto message = [&](const T& ids) {
    try {
      (void)gpt(ids);
    } catch (const Error& e) {
      return std::string(e.status().message());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(T::zeros({1, 5}, DType::kI64)),
            "Gpt: a sequence of 5 tokens is longer than the positional table of 4");
  EXPECT_EQ(message(T::zeros({1, 3})), "Gpt: needs integer token ids [batch, seq], got f32[1,3] on cpu:0");
  EXPECT_NE(message(T::from_vector<int64_t>({1, 7}, {1, 2})), "no error");  // an id past the vocabulary
}

}  // namespace
}  // namespace kiln::nn
