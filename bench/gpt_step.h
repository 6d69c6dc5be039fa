// examples/gpt's training step, for benchmarks: nn::Gpt through DataParallel on cpu:0 (one
// member, as `examples/gpt --devices=cpu:0` runs it), cross-entropy, backward, the global-norm
// clip at 1.0 and AdamW (betas 0.9 / 0.99, decay 0.1 on the linear layers' weights), under a
// precision policy set as --precision sets it. The pieces are examples/gpt.cc's MakeDataParallel
// and Loss (that file is a program, so they are repeated here); batches are random bytes from a
// fixed Generator instead of the corpus, which changes no step's work.
#ifndef KILN_BENCH_GPT_STEP_H_
#define KILN_BENCH_GPT_STEP_H_

#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autodiff/autodiff.h"
#include "bench/op_profile.h"
#include "distributed/data_parallel.h"
#include "nn/functional.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "nn/precision.h"

namespace kiln::bench {

struct GptBenchConfig {
  std::string name;
  nn::GptConfig model;
  int64_t batch;
  int64_t tokens() const { return batch * model.context; }
};

// examples/gpt's defaults, and issue 30's larger model (~10.7M parameters without wpe).
inline GptBenchConfig DefaultGpt() {
  return {
      .name = "default", .model = {.vocab = 256, .context = 64, .layers = 4, .heads = 4, .width = 128}, .batch = 32};
}
inline GptBenchConfig LargeGpt() {
  return {.name = "large", .model = {.vocab = 256, .context = 256, .layers = 6, .heads = 6, .width = 384}, .batch = 8};
}

// The parameters that count in the model FLOPs: all but the position embedding (wpe), which is
// a table lookup; the token embedding counts, since the tied head multiplies by it. This is
// nanoGPT's estimate_mfu (get_num_params() leaves wpe out) and PaLM's appendix B.
template <Backend B>
int64_t FlopParameters(nn::Module<B>& model) {
  int64_t n = 0;
  for (auto& [path, p] : model.named_parameters()) {
    if (path.rfind("wpe.", 0) != 0) n += p->numel();
  }
  return n;
}

// Model FLOPs of one training step (issue 30): 6 x parameters x tokens for forward and
// backward, plus attention's 12 x layers x context x width per token (its score and value
// products, which no parameter counts).
inline double ModelFlopsPerStep(int64_t flop_parameters, const GptBenchConfig& c) {
  const double per_token = 6.0 * flop_parameters + 12.0 * c.model.layers * c.model.context * c.model.width;
  return per_token * c.tokens();
}

// The step's largest GEMM, by FLOPs: the MLP's fc, [B*T, C] x [C, 4C] (its projection back,
// [B*T, 4C] x [4C, C], ties it; the QKV projection is 3C wide), unless the vocabulary exceeds
// 4C and the tied head, [B*T, C] x [C, V], is larger. nn::Linear keeps its weight as [out, in]
// and multiplies by its transpose, a view: [B*T, C] x [4C, C]^T.
struct GemmShape {
  int64_t m, k, n;
  std::string what;
  double flops() const { return 2.0 * m * k * n; }
};
inline GemmShape LargestGemm(const GptBenchConfig& c) {
  const int64_t rows = c.tokens(), width = c.model.width;
  if (c.model.vocab > 4 * width) return {rows, width, c.model.vocab, "tied head [B*T, C] x [V, C]^T"};
  return {rows, width, 4 * width, "MLP fc [B*T, C] x [4C, C]^T"};
}

// AdamW whose updates count as the optimizer's in a profile (and mark its phase). Used only on
// profiled backends; the timed step runs nn::AdamW itself.
template <Backend B>
class ProfiledAdamW : public nn::AdamW<B> {
 public:
  using nn::AdamW<B>::AdamW;

 protected:
  Tensor<B> Update(const std::string& path, const Tensor<B>& p, const Tensor<B>& g) override {
    OpProfile::MarkPhase(Phase::kOptimizer);
    OptimizerScope scope;
    return nn::AdamW<B>::Update(path, p, g);
  }
};

template <Backend B>
class GptStep {
 public:
  using AD = Autodiff<B>;

  // `profiled`: AdamW's updates and the loss's phases are marked for OpProfile.
  GptStep(const GptBenchConfig& c, nn::Precision precision, bool profiled, uint64_t seed = 1) : config_(c) {
    Generator gen(seed);
    const auto device = typename B::Device(0);
    nn::Gpt<AD> model(c.model, gen, device);
    flop_parameters_ = FlopParameters(model);
    nn::SetPrecision(model, precision);
    auto group = std::make_shared<distributed::DeviceGroup<AD>>(std::vector<typename B::Device>{device});
    const nn::AdamWOptions adamw{.beta2 = 0.99, .weight_decay = 0.1, .decays = nn::DecayOnlyMatrices};
    auto dp = distributed::DataParallel<B>::Create(model, group, [&]() -> std::unique_ptr<nn::Optimizer<B>> {
      if (profiled) return std::make_unique<ProfiledAdamW<B>>(1e-3, adamw);
      return std::make_unique<nn::AdamW<B>>(1e-3, adamw);
    });
    if (!dp.ok()) ThrowIfError(dp.status());
    dp_ = *std::move(dp);
    dp_->set_clip_grad_norm(1.0);
    for (int i = 0; i < kBatches; ++i) batches_.push_back(RandomBatch(gen, device));
  }

  // One step on the next batch; the batch's mean loss.
  double Step() {
    const auto& [x, y] = batches_[next_++ % batches_.size()];
    const absl::StatusOr<double> loss = dp_->Step(x, y, Loss);
    if (!loss.ok()) ThrowIfError(loss.status());
    return *loss;
  }

  const GptBenchConfig& config() const { return config_; }
  int64_t flop_parameters() const { return flop_parameters_; }
  double model_flops_per_step() const { return ModelFlopsPerStep(flop_parameters_, config_); }

 private:
  static constexpr int kBatches = 4;

  // examples/gpt.cc's Loss, with the phases marked for a profile.
  static Tensor<AD> Loss(nn::Module<AD>& model, const Tensor<AD>& x, const Tensor<AD>& y) {
    OpProfile::MarkPhase(Phase::kForward);
    const Tensor<AD> logits = model(x);
    Tensor<AD> loss = nn::functional::cross_entropy(logits.reshape({-1, logits.size(2)}), y.reshape({-1}));
    OpProfile::MarkPhase(Phase::kBackward);
    return loss;
  }

  std::pair<Tensor<B>, Tensor<B>> RandomBatch(Generator& gen, const typename B::Device& device) const {
    const int64_t n = config_.tokens();
    std::vector<int64_t> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = static_cast<int64_t>(gen.NextU64() % config_.model.vocab);
      y[i] = static_cast<int64_t>(gen.NextU64() % config_.model.vocab);
    }
    const Shape shape{config_.batch, config_.model.context};
    return {Tensor<B>::from_vector(x, shape, device), Tensor<B>::from_vector(y, shape, device)};
  }

  GptBenchConfig config_;
  int64_t flop_parameters_ = 0;
  std::unique_ptr<distributed::DataParallel<B>> dp_;
  std::vector<std::pair<Tensor<B>, Tensor<B>>> batches_;
  size_t next_ = 0;
};

}  // namespace kiln::bench

#endif  // KILN_BENCH_GPT_STEP_H_
