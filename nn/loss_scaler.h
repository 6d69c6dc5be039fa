// Dynamic loss scaling for f16 training (PyTorch's GradScaler rules): the loss is multiplied by
// `scale` before backward so that small gradients survive f16's range, the gradients are divided
// by it again before the update, and a step whose gradients hold inf or NaN is skipped with the
// scale backed off; after `growth_interval` good steps in a row the scale grows.
#ifndef KILN_NN_LOSS_SCALER_H_
#define KILN_NN_LOSS_SCALER_H_

#include <cmath>
#include <cstdint>
#include <optional>

#include "autodiff/autodiff.h"
#include "nn/module.h"
#include "tensor/error.h"

namespace kiln::nn {

struct LossScalerOptions {
  double init_scale = 65536;  // 2^16
  double growth_factor = 2;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions o = {}) : o_(o), scale_(o.init_scale) {
    if (!(o.init_scale > 0 && std::isfinite(o.init_scale)) ||
        !(o.growth_factor > 1 && std::isfinite(o.growth_factor)) || !(o.backoff_factor > 0 && o.backoff_factor < 1) ||
        o.growth_interval < 1) {
      ThrowInvalidArgument(
          "LossScaler: needs init_scale > 0, growth_factor > 1, backoff_factor in (0, 1) and growth_interval >= 1 "
          "(got %g, %g, %g, %d)",
          o.init_scale, o.growth_factor, o.backoff_factor, o.growth_interval);
    }
  }

  double scale() const { return scale_; }
  int64_t good_steps() const { return good_steps_; }
  int64_t skipped_steps() const { return skipped_; }

  // After a step whose gradients did (true) or did not overflow.
  void Update(bool found_inf) {
    if (found_inf) {
      scale_ *= o_.backoff_factor;
      good_steps_ = 0;
      ++skipped_;
      return;
    }
    if (++good_steps_ == o_.growth_interval) {
      const double grown = scale_ * o_.growth_factor;
      if (std::isfinite(grown)) scale_ = grown;
      good_steps_ = 0;
    }
  }

  // Whether this scaler could stand at `scale` with `good_steps` after `steps` updates: a
  // growth for each growth_interval good steps and a back-off for each skipped step, from
  // init_scale. A checkpoint's scale is checked by it: a scale no run reaches (a denormal, one
  // near the float maximum after a short run) would skip every later step.
  bool CanReach(double scale, int64_t good_steps, int64_t steps) const {
    if (!(scale > 0 && std::isfinite(scale)) || good_steps < 0 || good_steps >= o_.growth_interval ||
        good_steps > steps) {
      return false;
    }
    for (int64_t grown = 0; grown <= (steps - good_steps) / o_.growth_interval && grown < 4096; ++grown) {
      const double after_growth = o_.init_scale * std::pow(o_.growth_factor, static_cast<double>(grown));
      if (!std::isfinite(after_growth)) break;
      const double backoffs = std::round(std::log(scale / after_growth) / std::log(o_.backoff_factor));
      if (!(backoffs >= 0) || backoffs > static_cast<double>(steps - good_steps - grown * o_.growth_interval)) continue;
      const double reached = after_growth * std::pow(o_.backoff_factor, backoffs);
      if (std::abs(reached / scale - 1) < 1e-9) return true;  // the writer multiplied step by step
    }
    return false;
  }

  // The state a checkpoint keeps, and its restore.
  void Restore(double scale, int64_t good_steps) {
    if (!(scale > 0 && std::isfinite(scale)) || good_steps < 0 || good_steps >= o_.growth_interval) {
      ThrowInvalidArgument("LossScaler: scale %g and %d good steps are no state of this scaler", scale, good_steps);
    }
    scale_ = scale;
    good_steps_ = good_steps;
  }

 private:
  LossScalerOptions o_;
  double scale_;
  int64_t good_steps_ = 0;
  int64_t skipped_ = 0;
};

// g / scale; folds into `bad` (a one-element f32 tensor: 1 when any gradient so far held inf
// or NaN) whether this one does.
template <Backend B>
Tensor<B> UnscaleGradient(const Tensor<B>& g, double scale, std::optional<Tensor<B>>& bad) {
  const Tensor<B> unscaled = g * (1.0 / scale);
  // x - x is 0 for every finite x and NaN for inf or NaN, so the sum is 0 exactly when all are finite.
  const Tensor<B> part = (unscaled - unscaled).to(DType::kF32).sum().ne(0).to(DType::kF32);
  bad = bad ? bad->maximum(part) : part;
  return unscaled;
}

// Divides every gradient of `module` in `grads` by `scale` and returns, as a one-element f32
// tensor on the gradients' device, 1 when any of them holds inf or NaN and 0 otherwise (not
// read back, so the caller can agree on it with other members first).
template <Backend B>
std::optional<Tensor<B>> UnscaleGradients(Module<Autodiff<B>>& module, Gradients<B>& grads, double scale) {
  NoGradScope no_grad;
  std::optional<Tensor<B>> bad;
  for (auto& [name, p] : module.named_parameters()) {
    const auto g = grads.get(*p);
    if (!g) continue;
    grads.Set(p->primitive().node->id, UnscaleGradient(*g, scale, bad).primitive());
  }
  return bad;
}

}  // namespace kiln::nn

#endif  // KILN_NN_LOSS_SCALER_H_
