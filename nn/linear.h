// Linear: y = x W^T + b, with W stored [out, in] as PyTorch stores it, so checkpoints
// exchange weights unchanged. (The transpose is a free view that matmul reads in place.)
#ifndef KILN_NN_LINEAR_H_
#define KILN_NN_LINEAR_H_

#include <optional>

#include "nn/init.h"
#include "nn/module.h"
#include "nn/precision.h"

namespace kiln::nn {

struct LinearOptions {
  bool bias = true;
  DType dtype = DType::kF32;
  // Weights ~ N(0, init_std^2) (GPT-2's init) instead of Kaiming-uniform; the bias starts at 0
  // either way.
  std::optional<double> init_std;
};

template <Backend B>
class Linear : public Module<B> {
 public:
  Linear(int64_t in, int64_t out, Generator& gen, LinearOptions options = {}, const typename B::Device& device = {}) {
    if (in < 1 || out < 1) ThrowInvalidArgument("Linear(%d, %d): sizes must be positive", in, out);
    weight_ = this->add_parameter(
        "weight", options.init_std ? Tensor<B>::normal(Shape{out, in}, 0, *options.init_std, gen, options.dtype, device)
                                   : KaimingUniform<B>(Shape{out, in}, in, gen, options.dtype, device));
    if (options.bias) {
      bias_ = this->add_parameter("bias", Tensor<B>::zeros({out}, options.dtype, device));
    }
  }

  Tensor<B> forward(const Tensor<B>& x) override {
    const Tensor<B>& w = this->param(weight_);
    if (x.rank() < 1 || x.size(-1) != w.size(1)) {
      ThrowInvalidArgument("Linear(%d -> %d): input %s must end in a dim of %d", w.size(1), w.size(0), x.Describe(),
                           w.size(1));
    }
    const Tensor<B> xc = InComputeDType(*this, x), wc = InComputeDType(*this, w);
    if (!bias_) return fused::linear(xc, wc, nullptr);
    const Tensor<B> bc = InComputeDType(*this, this->param(*bias_));
    return fused::linear(xc, wc, &bc);
  }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<Linear>(); }

  const Tensor<B>& weight() const { return this->param(weight_); }

 private:
  size_t weight_ = 0;
  std::optional<size_t> bias_;
};

}  // namespace kiln::nn

#endif  // KILN_NN_LINEAR_H_
