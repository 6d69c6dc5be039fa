// Optimizers: SGD (momentum, weight decay, Nesterov) and AdamW. They update a module's
// parameters in place of their values (same leaves, so hooks stay registered) from the
// gradients of one backward pass, without recording a graph. Their state is named by
// parameter path, so it survives cloning and checkpoints.
#ifndef KILN_NN_OPTIM_H_
#define KILN_NN_OPTIM_H_

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "autodiff/autodiff.h"
#include "nn/module.h"

namespace kiln::nn {

// The most steps an optimizer counts: up to 2^53 a double (AdamW's bias correction) still
// holds the count exactly, and a checkpoint's count is checked against it.
inline constexpr int64_t kMaxOptimizerSteps = int64_t{1} << 53;

template <Backend B>  // B: the wrapped backend; the module runs on Autodiff<B>
class Optimizer {
 public:
  using State = std::map<std::string, Tensor<B>>;  // "slot/param.path" -> tensor

  virtual ~Optimizer() = default;
  virtual const char* name() const = 0;
  // The state slots kept per parameter: state "<slot>/<path>" has the shape and dtype of the
  // parameter at <path>. A checkpoint's state is checked against this before it is loaded.
  virtual std::vector<std::string> slots() const = 0;

  // One update of every parameter that has a gradient in `grads`.
  void step(Module<Autodiff<B>>& module, const Gradients<B>& grads) {
    CountStep();
    NoGradScope no_grad;
    for (auto& [path, param] : module.named_parameters()) {
      const auto g = grads.get(*param);
      if (!g) continue;
      *param = param->with_value(Update(path, param->inner(), *g));
    }
  }

  // One update of pieces of parameters, such as a sharded data-parallel member's chunks
  // (distributed/shard_layout.h): values[i] and grads[i] are the same elements of the
  // parameter at paths[i], and its state slots hold just those elements. Returns the pieces'
  // new values. The updates are element-wise, so a piece ends bit-identical to the same
  // elements of a whole parameter's step().
  std::vector<Tensor<B>> step_pieces(absl::Span<const std::string> paths, absl::Span<const Tensor<B>> values,
                                     absl::Span<const Tensor<B>> grads) {
    begin_pieces_step();
    return update_pieces(paths, values, grads);
  }
  // step_pieces in parts, so a caller can update a few pieces at a time and free each group's
  // inputs before the next (a sharded member's buckets): begin_pieces_step() once per step,
  // then update_pieces() on every piece exactly once.
  void begin_pieces_step() { CountStep(); }
  std::vector<Tensor<B>> update_pieces(absl::Span<const std::string> paths, absl::Span<const Tensor<B>> values,
                                       absl::Span<const Tensor<B>> grads) {
    if (paths.size() != values.size() || paths.size() != grads.size()) {
      ThrowInvalidArgument("optimizer %s: %d paths, %d values and %d gradients", name(), paths.size(), values.size(),
                           grads.size());
    }
    NoGradScope no_grad;
    std::vector<Tensor<B>> out;
    out.reserve(paths.size());
    for (size_t i = 0; i < paths.size(); ++i) out.push_back(Update(paths[i], values[i], grads[i]));
    return out;
  }

  // Whether replaying one recorded update (a CUDA graph of a training step) is the next
  // update: true when the update's numbers depend on nothing the host changes from step to
  // step but the learning rate (which the replayer watches). AdamW's bias correction uses the
  // step count, so it is not.
  virtual bool replayable() const { return true; }
  // Counts a step made by replaying a recorded one (the recorded update did the work).
  void CountReplayedStep() { CountStep(); }

  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  int64_t steps() const { return steps_; }

  // For checkpoints.
  const State& state() const { return state_; }
  void load_state(State state, int64_t steps) {
    if (steps < 0 || steps > kMaxOptimizerSteps) {
      ThrowInvalidArgument("optimizer %s: step count %d is not in [0, 2^53]", name(), steps);
    }
    state_ = std::move(state);
    steps_ = steps;
  }

 protected:
  void CountStep() {
    if (steps_ >= kMaxOptimizerSteps) {
      ThrowOutOfRange("optimizer %s: already %d steps, the most it counts", name(), steps_);
    }
    ++steps_;
  }
  explicit Optimizer(double lr) : lr_(lr) {
    if (!(lr >= 0)) ThrowInvalidArgument("optimizer: learning rate %g must be >= 0", lr);
  }
  // The new value of the parameter at `path`.
  virtual Tensor<B> Update(const std::string& path, const Tensor<B>& value, const Tensor<B>& grad) = 0;
  Tensor<B>* Slot(const std::string& slot, const std::string& path) {
    auto it = state_.find(slot + "/" + path);
    return it == state_.end() ? nullptr : &it->second;
  }
  void SetSlot(const std::string& slot, const std::string& path, Tensor<B> value) {
    state_.insert_or_assign(slot + "/" + path, std::move(value));
  }

  double lr_;
  int64_t steps_ = 0;
  State state_;
};

struct SgdOptions {
  double momentum = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// PyTorch's SGD: g += wd * p; v = momentum * v + g; step along v (or g + momentum * v).
template <Backend B>
class Sgd : public Optimizer<B> {
 public:
  explicit Sgd(double lr, SgdOptions options = {}) : Optimizer<B>(lr), o_(options) {
    if (o_.momentum < 0 || o_.weight_decay < 0 || (o_.nesterov && o_.momentum == 0)) {
      ThrowInvalidArgument(
          "Sgd: momentum %g and weight_decay %g must be >= 0, and Nesterov "
          "needs momentum",
          o_.momentum, o_.weight_decay);
    }
  }
  const char* name() const override { return "sgd"; }
  std::vector<std::string> slots() const override {
    return o_.momentum != 0 ? std::vector<std::string>{"momentum"} : std::vector<std::string>{};
  }

 protected:
  Tensor<B> Update(const std::string& path, const Tensor<B>& p, const Tensor<B>& grad) override {
    // One pass over the parameter where the backend has the kernel (tensor/fused.h).
    auto s =
        fused::sgd_update(p, grad, this->Slot("momentum", path), this->lr_, o_.momentum, o_.weight_decay, o_.nesterov);
    if (o_.momentum != 0) this->SetSlot("momentum", path, std::move(s.velocity));
    return s.param;
  }

 private:
  SgdOptions o_;
};

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  // Parameter groups: which parameters (by path) take the weight decay; unset: all. E.g.
  // DecayOnlyMatrices leaves biases, norms and embeddings undecayed, as GPT training does.
  std::function<bool(const std::string& path)> decays;
};

// Decay the weights of linear layers only: paths ending in ".weight" that are not of a norm
// (ln_*, *norm*) or an embedding (wte, wpe, *embed*).
inline bool DecayOnlyMatrices(const std::string& path) {
  const auto ends = [&](const char* s) {
    const std::string t = s;
    return path.size() >= t.size() && path.compare(path.size() - t.size(), t.size(), t) == 0;
  };
  const auto has = [&](const char* s) { return path.find(s) != std::string::npos; };
  return ends(".weight") && !has("ln_") && !has("norm") && !has("wte") && !has("wpe") && !has("embed");
}

// Loshchilov & Hutter: Adam with weight decay applied to the parameter, not the gradient.
template <Backend B>
class AdamW : public Optimizer<B> {
 public:
  explicit AdamW(double lr, AdamWOptions options = {}) : Optimizer<B>(lr), o_(options) {
    if (!(o_.beta1 >= 0 && o_.beta1 < 1 && o_.beta2 >= 0 && o_.beta2 < 1 && o_.eps > 0)) {
      ThrowInvalidArgument("AdamW: betas (%g, %g) must be in [0, 1) and eps %g > 0", o_.beta1, o_.beta2, o_.eps);
    }
  }
  const char* name() const override { return "adamw"; }
  std::vector<std::string> slots() const override { return {"exp_avg", "exp_avg_sq"}; }
  bool replayable() const override { return false; }  // bias correction: the step count

 protected:
  Tensor<B> Update(const std::string& path, const Tensor<B>& p, const Tensor<B>& g) override {
    const double t = static_cast<double>(this->steps_);
    const double c1 = 1 - std::pow(o_.beta1, t), c2 = 1 - std::pow(o_.beta2, t);
    const double decay = o_.decays && !o_.decays(path) ? 0 : o_.weight_decay;
    // One pass over the parameter where the backend has the kernel (tensor/fused.h).
    auto s = fused::adamw_update(p, g, this->Slot("exp_avg", path), this->Slot("exp_avg_sq", path), this->lr_, o_.beta1,
                                 o_.beta2, o_.eps, decay, c1, c2);
    this->SetSlot("exp_avg", path, std::move(s.exp_avg));
    this->SetSlot("exp_avg_sq", path, std::move(s.exp_avg_sq));
    return s.param;
  }

 private:
  AdamWOptions o_;
};

// Learning-rate schedules: the rate for a given step (or epoch).
struct StepSchedule {
  double base_lr;
  int64_t step_size;  // every step_size steps, multiply by gamma
  double gamma = 0.1;
  double operator()(int64_t step) const {
    return base_lr * std::pow(gamma, static_cast<double>(step / std::max<int64_t>(step_size, 1)));
  }
};

struct CosineSchedule {
  double base_lr;
  int64_t total_steps;
  double min_lr = 0;
  double operator()(int64_t step) const {
    const double t = std::min(1.0, static_cast<double>(step) / std::max<int64_t>(total_steps, 1));
    return min_lr + 0.5 * (base_lr - min_lr) * (1 + std::cos(t * 3.14159265358979323846));
  }
};

}  // namespace kiln::nn

#endif  // KILN_NN_OPTIM_H_
