// CausalSelfAttention: multi-head self-attention over [batch, seq, dim] where position i sees
// positions <= i (GPT's), with one fused qkv projection and the heads made by reshape and
// permute; then the output projection. Parameters under PyTorch-like names: qkv.weight
// [3*dim, dim] (rows: q, k, v), qkv.bias, proj.weight, proj.bias.
#ifndef KILN_NN_ATTENTION_H_
#define KILN_NN_ATTENTION_H_

#include <optional>

#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace kiln::nn {

struct AttentionModuleOptions {
  double dropout = 0;  // on the attention weights and the output, when training
  bool bias = true;
  DType dtype = DType::kF32;
  // Linear weights ~ N(0, init_std^2), those that project back into the residual stream with
  // residual_init_std (GPT-2: 0.02 and 0.02 / sqrt(2 layers)); unset: Kaiming-uniform.
  std::optional<double> init_std, residual_init_std;
  // TransformerBlock's MLP: GELU's tanh form (GPT-2's) or the exact one (nanoGPT's nn.GELU()).
  functional::GeluApproximation gelu = functional::GeluApproximation::kTanh;
};

// The keys and values of the positions an attention layer has seen, [batch, heads, t, head_dim]
// each (inference with a key-value cache: each new position is computed once).
template <Backend B>
struct AttentionCache {
  std::optional<Tensor<B>> k, v;
};

template <Backend B>
class CausalSelfAttention : public Module<B> {
 public:
  CausalSelfAttention(int64_t dim, int64_t heads, Generator& gen, AttentionModuleOptions options = {},
                      const typename B::Device& device = {})
      : dim_(dim), heads_(heads), dropout_(options.dropout), gen_(this->add_generator("dropout", gen.NextU64())) {
    if (dim < 1 || heads < 1 || dim % heads != 0) {
      ThrowInvalidArgument("CausalSelfAttention: %d heads do not divide the width %d", heads, dim);
    }
    const LinearOptions linear{.bias = options.bias, .dtype = options.dtype, .init_std = options.init_std};
    const LinearOptions residual{.bias = options.bias, .dtype = options.dtype, .init_std = options.residual_init_std};
    qkv_ = this->add_child("qkv", std::make_unique<Linear<B>>(dim, 3 * dim, gen, linear, device));
    proj_ = this->add_child("proj", std::make_unique<Linear<B>>(dim, dim, gen, residual, device));
  }

  Tensor<B> forward(const Tensor<B>& x) override {
    if (x.rank() != 3 || x.size(2) != dim_) {
      ThrowInvalidArgument("CausalSelfAttention(%d): input %s must be [batch, seq, %d]", dim_, x.Describe(), dim_);
    }
    const Tensor<B> projected = this->child(qkv_)(x);  // [b, s, 3 d]: q, k, v side by side
    const bool dropping = dropout_ > 0 && this->is_training();
    // Without dropout on the weights, one fused op reads the heads in place (tensor/fused.h).
    const Tensor<B> merged = dropping ? AttendWithDropout(projected) : fused::causal_attention(projected, heads_).y;
    return functional::dropout(this->child(proj_)(merged), dropout_, this->is_training(), this->generator(gen_));
  }

  // Inference over the positions after those in `cache`, whose keys and values join it: the
  // first call (an empty cache) is causal over its positions; after it, one position at a time,
  // each seeing every cached one. No dropout.
  Tensor<B> forward_cached(const Tensor<B>& x, AttentionCache<B>& cache) {
    const int64_t b = x.size(0), s = x.size(1), hd = dim_ / heads_;
    if (cache.k && s != 1) ThrowInvalidArgument("CausalSelfAttention: a cached step takes one position, got %d", s);
    const Tensor<B> qkv = this->child(qkv_)(x).reshape({b, s, 3, heads_, hd}).permute({2, 0, 3, 1, 4});
    const Tensor<B> k = qkv.slice(0, 1, 2).squeeze(0), v = qkv.slice(0, 2, 3).squeeze(0);
    cache.k = cache.k ? Tensor<B>::cat(std::vector<Tensor<B>>{*cache.k, k}, 2) : k;
    cache.v = cache.v ? Tensor<B>::cat(std::vector<Tensor<B>>{*cache.v, v}, 2) : v;
    const Tensor<B> y =
        functional::scaled_dot_product_attention(qkv.slice(0, 0, 1).squeeze(0), *cache.k, *cache.v, {.causal = s > 1});
    return this->child(proj_)(y.permute({0, 2, 1, 3}).reshape({b, s, dim_}));
  }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<CausalSelfAttention>(); }

 private:
  // The heads as views of the projections, then scaled_dot_product_attention with its dropout.
  Tensor<B> AttendWithDropout(const Tensor<B>& projected) {
    const int64_t b = projected.size(0), s = projected.size(1), hd = dim_ / heads_;
    const Tensor<B> qkv = projected.reshape({b, s, 3, heads_, hd}).permute({2, 0, 3, 1, 4});  // [3, b, heads, s, hd]
    const functional::AttentionOptions<B> attention{
        .causal = true, .dropout = dropout_, .training = true, .gen = &this->generator(gen_)};
    const Tensor<B> y = functional::scaled_dot_product_attention(
        qkv.slice(0, 0, 1).squeeze(0), qkv.slice(0, 1, 2).squeeze(0), qkv.slice(0, 2, 3).squeeze(0), attention);
    return y.permute({0, 2, 1, 3}).reshape({b, s, dim_});
  }

  int64_t dim_, heads_;
  double dropout_;
  size_t gen_;  // generator(gen_): the dropout masks
  size_t qkv_ = 0, proj_ = 0;
};

}  // namespace kiln::nn

#endif  // KILN_NN_ATTENTION_H_
