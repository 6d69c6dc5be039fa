// TransformerBlock: GPT-2's pre-LN block over [batch, seq, dim]:
//   x + attention(ln_1(x)), then + mlp(ln_2(x)) with mlp = fc (dim -> 4 dim), GELU, proj
// (GELU's tanh form unless AttentionModuleOptions::gelu says exact).
// set_recompute(true): activation checkpointing (nn/recompute.h) over the whole block; the
// parameters' names and the gradients stay exactly the same.
#ifndef KILN_NN_TRANSFORMER_BLOCK_H_
#define KILN_NN_TRANSFORMER_BLOCK_H_

#include "nn/attention.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "nn/recompute.h"

namespace kiln::nn {

template <Backend B>
class TransformerBlock : public Module<B> {
 public:
  TransformerBlock(int64_t dim, int64_t heads, Generator& gen, AttentionModuleOptions options = {},
                   const typename B::Device& device = {})
      : dropout_(options.dropout), gelu_(options.gelu), gen_(this->add_generator("dropout", gen.NextU64())) {
    this->set_shard_unit(true);  // ZeRO-3 gathers a block's parameters around its forward
    const NormOptions norm{.dtype = options.dtype};
    const LinearOptions linear{.bias = options.bias, .dtype = options.dtype, .init_std = options.init_std};
    const LinearOptions residual{.bias = options.bias, .dtype = options.dtype, .init_std = options.residual_init_std};
    ln_1_ = this->add_child("ln_1", std::make_unique<LayerNorm<B>>(Dims{dim}, norm, device));
    attn_ = this->add_child("attn", std::make_unique<CausalSelfAttention<B>>(dim, heads, gen, options, device));
    ln_2_ = this->add_child("ln_2", std::make_unique<LayerNorm<B>>(Dims{dim}, norm, device));
    fc_ = this->add_child("mlp.fc", std::make_unique<Linear<B>>(dim, 4 * dim, gen, linear, device));
    proj_ = this->add_child("mlp.proj", std::make_unique<Linear<B>>(4 * dim, dim, gen, residual, device));
  }

  // Inference with a key-value cache (CausalSelfAttention::forward_cached).
  Tensor<B> forward_cached(const Tensor<B>& x, AttentionCache<B>& cache) { return Compute(x, &cache); }

  Tensor<B> forward(const Tensor<B>& x) override {
    if (!recompute_) return Compute(x);
    return RecomputeForward<B>(
        {this}, x, [this](const Tensor<B>& in) { return Compute(in); }, hooks_);
  }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<TransformerBlock>(); }

  // Keeps no activations in forward and recomputes them in backward; `hooks` run around each
  // recompute (nn/recompute.h).
  void set_recompute(bool on, RecomputeHooks hooks = {}) {
    recompute_ = on;
    hooks_ = std::move(hooks);
  }
  bool recompute() const { return recompute_; }

 private:
  // `cache`: attention over the cached keys and values too (inference), else the plain attention.
  Tensor<B> Compute(const Tensor<B>& x, AttentionCache<B>* cache = nullptr) {
    // The residual stream keeps x's dtype (f32 under mixed precision); the branches may compute
    // in a half type.
    const Tensor<B> normed = this->child(ln_1_)(x);
    const Tensor<B> attended =
        cache ? static_cast<CausalSelfAttention<B>&>(this->child(attn_)).forward_cached(normed, *cache)
              : this->child(attn_)(normed);
    const Tensor<B> h = x + attended.to(x.dtype());
    const Tensor<B> m = this->child(proj_)(functional::gelu(this->child(fc_)(this->child(ln_2_)(h)), gelu_));
    return h + functional::dropout(m, dropout_, this->is_training(), this->generator(gen_)).to(x.dtype());
  }

  double dropout_;
  functional::GeluApproximation gelu_;
  size_t gen_;  // generator(gen_): the dropout masks
  size_t ln_1_ = 0, attn_ = 0, ln_2_ = 0, fc_ = 0, proj_ = 0;
  bool recompute_ = false;
  RecomputeHooks hooks_;
};

}  // namespace kiln::nn

#endif  // KILN_NN_TRANSFORMER_BLOCK_H_
