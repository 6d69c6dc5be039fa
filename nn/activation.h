// Parameter-free layers: ReLU, GELU, Flatten, and Dropout (seeded, on only in training).
#ifndef KILN_NN_ACTIVATION_H_
#define KILN_NN_ACTIVATION_H_

#include <cmath>
#include <numbers>

#include "nn/module.h"

namespace kiln::nn {

template <Backend B>
class ReLU : public Module<B> {
 public:
  Tensor<B> forward(const Tensor<B>& x) override { return x.relu(); }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<ReLU>(); }
};

// The tanh approximation (as in GPT-2 and PyTorch's approximate="tanh").
template <Backend B>
Tensor<B> Gelu(const Tensor<B>& x) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1 + (c * (x + 0.044715 * x.pow(3))).tanh());
}

template <Backend B>
class GELU : public Module<B> {
 public:
  Tensor<B> forward(const Tensor<B>& x) override { return Gelu(x); }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<GELU>(); }
};

// [N, ...] -> [N, product of the rest].
template <Backend B>
class Flatten : public Module<B> {
 public:
  Tensor<B> forward(const Tensor<B>& x) override { return x.reshape({x.size(0), -1}); }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<Flatten>(); }
};

// Zeroes each element with probability p and scales the rest by 1/(1-p), in training mode.
// Masks come from the layer's own generator, so a seed fixes every mask of a run.
template <Backend B>
class Dropout : public Module<B> {
 public:
  Dropout(double p, uint64_t seed) : p_(p), gen_(this->add_generator("masks", seed)) {
    if (!(p >= 0 && p < 1)) ThrowInvalidArgument("Dropout: p = %g must be in [0, 1)", p);
  }
  Tensor<B> forward(const Tensor<B>& x) override {
    if (!this->is_training() || p_ == 0) return x;
    const auto keep = Tensor<B>::uniform(x.shape(), 0, 1, this->generator(gen_), x.dtype(), x.device()).ge(p_);
    return Tensor<B>::where(keep, x / (1 - p_), x.scalar_like(0));
  }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<Dropout>(); }

 private:
  double p_;
  size_t gen_;  // generator(gen_): the masks
};

}  // namespace kiln::nn

#endif  // KILN_NN_ACTIVATION_H_
