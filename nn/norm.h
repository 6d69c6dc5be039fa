// LayerNorm and RMSNorm over the last dims of their input (the normalized shape), with a
// learned scale (weight, ones at first) and, for LayerNorm, shift (bias, zeros).
#ifndef KILN_NN_NORM_H_
#define KILN_NN_NORM_H_

#include <optional>

#include "nn/functional.h"
#include "nn/module.h"
#include "nn/precision.h"

namespace kiln::nn {

struct NormOptions {
  double eps = 1e-5;
  bool affine = true;  // learn weight (and LayerNorm's bias)
  DType dtype = DType::kF32;
};

template <Backend B>
class LayerNorm : public Module<B> {
 public:
  explicit LayerNorm(Dims normalized, NormOptions options = {}, const typename B::Device& device = {})
      : normalized_(std::move(normalized)), eps_(options.eps) {
    if (options.affine) {
      weight_ = this->add_parameter("weight", Tensor<B>::ones(Shape(normalized_), options.dtype, device));
      bias_ = this->add_parameter("bias", Tensor<B>::zeros(Shape(normalized_), options.dtype, device));
    }
  }
  Tensor<B> forward(const Tensor<B>& x) override {
    const Tensor<B>* weight = weight_ ? &this->param(*weight_) : nullptr;
    return functional::layer_norm(ForNorm(*this, x, weight), normalized_, weight,
                                  bias_ ? &this->param(*bias_) : nullptr, eps_);
  }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<LayerNorm>(); }

 private:
  Dims normalized_;
  double eps_;
  std::optional<size_t> weight_, bias_;
};

template <Backend B>
class RMSNorm : public Module<B> {
 public:
  explicit RMSNorm(Dims normalized, NormOptions options = {.eps = 1e-6}, const typename B::Device& device = {})
      : normalized_(std::move(normalized)), eps_(options.eps) {
    if (options.affine) {
      weight_ = this->add_parameter("weight", Tensor<B>::ones(Shape(normalized_), options.dtype, device));
    }
  }
  Tensor<B> forward(const Tensor<B>& x) override {
    const Tensor<B>* weight = weight_ ? &this->param(*weight_) : nullptr;
    return functional::rms_norm(ForNorm(*this, x, weight), normalized_, weight, eps_);
  }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<RMSNorm>(); }

 private:
  Dims normalized_;
  double eps_;
  std::optional<size_t> weight_;
};

}  // namespace kiln::nn

#endif  // KILN_NN_NORM_H_
