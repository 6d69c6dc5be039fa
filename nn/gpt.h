// GPT: a decoder-only transformer over token ids [batch, seq] -> logits [batch, seq, vocab]:
// token and learned position embeddings, pre-LN TransformerBlocks, a final LayerNorm, and an
// output head tied to the token embedding (one parameter used twice: its gradient sums both
// uses, gradient sync syncs it once, checkpoints store it once). Parameter names follow
// nanoGPT's: wte.weight, wpe.weight, h.N.*, ln_f.*. Initialised as GPT-2: N(0, 0.02^2) weights, the
// projections into the residual stream scaled by 1 / sqrt(2 layers), zero biases.
#ifndef KILN_NN_GPT_H_
#define KILN_NN_GPT_H_

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/norm.h"
#include "nn/transformer_block.h"

namespace kiln::nn {

struct GptConfig {
  int64_t vocab = 256;
  int64_t context = 64;  // the longest sequence (the positional table's size)
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t width = 128;
  double dropout = 0;
  DType dtype = DType::kF32;
  bool recompute = false;  // activation checkpointing of every block (names and math unchanged)
  // The blocks' GELU: the tanh form (GPT-2's) or exact (nanoGPT's, for its logits to the 1e-5).
  functional::GeluApproximation gelu = functional::GeluApproximation::kTanh;
};

template <Backend B>
class Gpt : public Module<B> {
 public:
  Gpt(const GptConfig& c, Generator& gen, const typename B::Device& device = {}) : config_(c) {
    if (c.vocab < 1 || c.context < 1 || c.layers < 0) {
      ThrowInvalidArgument("Gpt: vocab %d, context %d and layers %d must be positive", c.vocab, c.context, c.layers);
    }
    const EmbeddingOptions init{.init_std = 0.02, .dtype = c.dtype};
    wte_ = this->add_child("wte", std::make_unique<Embedding<B>>(c.vocab, c.width, gen, init, device));
    wpe_ = this->add_child("wpe", std::make_unique<Embedding<B>>(c.context, c.width, gen, init, device));
    for (int64_t i = 0; i < c.layers; ++i) {
      blocks_.push_back(this->add_child(
          absl::StrCat("h.", i),
          std::make_unique<TransformerBlock<B>>(
              c.width, c.heads, gen,
              AttentionModuleOptions{.dropout = c.dropout,
                                     .dtype = c.dtype,
                                     .init_std = 0.02,
                                     .residual_init_std = 0.02 / std::sqrt(2.0 * std::max<int64_t>(c.layers, 1)),
                                     .gelu = c.gelu},
              device)));
    }
    set_recompute(c.recompute);
    ln_f_ =
        this->add_child("ln_f", std::make_unique<LayerNorm<B>>(Dims{c.width}, NormOptions{.dtype = c.dtype}, device));
  }

  // ids: integers [batch, seq] in [0, vocab), seq <= context.
  Tensor<B> forward(const Tensor<B>& ids) override {
    if (ids.rank() != 2 || IsFloating(ids.dtype())) {
      ThrowInvalidArgument("Gpt: needs integer token ids [batch, seq], got %s", ids.Describe());
    }
    const int64_t seq = ids.size(1);
    if (seq > config_.context) {
      ThrowInvalidArgument("Gpt: a sequence of %d tokens is longer than the positional table of %d", seq,
                           config_.context);
    }
    Tensor<B> h = Embed(ids, 0);
    for (size_t i : blocks_) h = this->child(i)(h);
    return Logits(h);
  }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<Gpt>(); }

  // Inference with a key-value cache: the logits [batch, seq, vocab] of the positions after
  // those `cache` holds (the whole prompt first, then one token at a time), which join it.
  struct Cache {
    std::vector<AttentionCache<B>> layers;
    int64_t length = 0;  // positions seen
  };
  Tensor<B> forward_cached(const Tensor<B>& ids, Cache& cache) {
    if (ids.rank() != 2) ThrowInvalidArgument("Gpt: needs token ids [batch, seq], got %s", ids.Describe());
    const int64_t seq = ids.size(1);
    if (cache.length + seq > config_.context) {
      ThrowInvalidArgument("Gpt: %d cached and %d new positions exceed the positional table of %d", cache.length, seq,
                           config_.context);
    }
    cache.layers.resize(blocks_.size());
    Tensor<B> h = Embed(ids, cache.length);
    for (size_t i = 0; i < blocks_.size(); ++i) {
      h = static_cast<TransformerBlock<B>&>(this->child(blocks_[i])).forward_cached(h, cache.layers[i]);
    }
    cache.length += seq;
    return Logits(h);
  }

  const GptConfig& config() const { return config_; }
  // Turns activation checkpointing of every block on or off (TransformerBlock::set_recompute).
  void set_recompute(bool on, const RecomputeHooks& hooks = {}) {
    config_.recompute = on;
    for (size_t i : blocks_) static_cast<TransformerBlock<B>&>(this->child(i)).set_recompute(on, hooks);
  }
  const Tensor<B>& token_embedding() { return static_cast<Embedding<B>&>(this->child(wte_)).weight(); }

 private:
  // Token plus position embeddings of ids [batch, seq] at positions first, first + 1, ...
  Tensor<B> Embed(const Tensor<B>& ids, int64_t first) {
    const Tensor<B> positions = Tensor<B>::arange(ids.size(1), DType::kI64, ids.device());
    return this->child(wte_)(ids) + this->child(wpe_)(first == 0 ? positions : positions + first);
  }
  // The final norm, then the head tied to the token embedding.
  Tensor<B> Logits(const Tensor<B>& h) {
    const Tensor<B> normed = this->child(ln_f_)(h);
    return functional::linear(InComputeDType(*this, normed), InComputeDType(*this, token_embedding()));
  }

  GptConfig config_;
  size_t wte_ = 0, wpe_ = 0, ln_f_ = 0;
  std::vector<size_t> blocks_;
};

}  // namespace kiln::nn

#endif  // KILN_NN_GPT_H_
