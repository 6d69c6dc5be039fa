// Conv2d and MaxPool2d on [N, C, H, W] tensors, built from ops every backend has: the input is
// unfolded into patches with one index_select (im2col; the index is built once per input size
// and padding reads an appended zero), then a matmul. Autodiff differentiates them for free.
#ifndef KILN_NN_CONV_H_
#define KILN_NN_CONV_H_

#include <map>
#include <tuple>

#include "nn/init.h"
#include "nn/module.h"
#include "nn/precision.h"

namespace kiln::nn {

struct Window {
  int64_t kernel;
  int64_t stride;
  int64_t padding;
  int64_t Out(int64_t size) const { return (size + 2 * padding - kernel) / stride + 1; }
};

// Positions into a flattened [C, H, W] input of every patch element, ordered
// (out_y, out_x, c, ky, kx) when `patch_major`, else (c, out_y, out_x, ky, kx). A position
// in the padding is C*H*W: the zero appended after the input.
TensorData UnfoldIndex(int64_t channels, int64_t height, int64_t width, const Window& w, bool patch_major);

template <Backend B>
class Unfolder {
 public:
  // [N, C, H, W] -> [N, C*H*W + 1] with a trailing zero, picked by a cached index.
  Tensor<B> Patches(const Tensor<B>& x, const Window& w, bool patch_major) {
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
    const auto key = std::make_tuple(c, h, wd, patch_major);
    auto it = cache_.find(key);
    if (it == cache_.end() || !(it->second.device() == x.device())) {
      it = cache_.insert_or_assign(key, Tensor<B>::from_data(UnfoldIndex(c, h, wd, w, patch_major), x.device())).first;
    }
    Tensor<B> flat = x.reshape({n, c * h * wd});
    if (w.padding > 0) {
      const std::vector<Tensor<B>> parts = {flat, Tensor<B>::zeros({n, 1}, x.dtype(), x.device())};
      flat = Tensor<B>::cat(parts, 1);
    }
    return flat.index_select(1, it->second);
  }

 private:
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, Tensor<B>> cache_;
};

struct Conv2dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
  bool bias = true;
  DType dtype = DType::kF32;
};

template <Backend B>
class Conv2d : public Module<B> {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, Generator& gen, Conv2dOptions options = {},
         const typename B::Device& device = {})
      : window_{kernel, options.stride, options.padding} {
    if (in_channels < 1 || out_channels < 1 || kernel < 1 || options.stride < 1 || options.padding < 0) {
      ThrowInvalidArgument(
          "Conv2d(%d, %d, kernel %d, stride %d, padding %d): sizes must be "
          "positive and padding non-negative",
          in_channels, out_channels, kernel, options.stride, options.padding);
    }
    const int64_t fan_in = in_channels * kernel * kernel;
    weight_ = this->add_parameter("weight", KaimingUniform<B>(Shape{out_channels, in_channels, kernel, kernel}, fan_in,
                                                              gen, options.dtype, device));
    if (options.bias) {
      bias_ = this->add_parameter("bias", Tensor<B>::zeros({out_channels}, options.dtype, device));
    }
  }

  Tensor<B> forward(const Tensor<B>& x) override {
    const Tensor<B>& w = this->param(weight_);
    const int64_t out_c = w.size(0), in_c = w.size(1);
    if (x.rank() != 4 || x.size(1) != in_c) {
      ThrowInvalidArgument("Conv2d: input %s must be [N, %d, H, W]", x.Describe(), in_c);
    }
    const int64_t n = x.size(0), oh = window_.Out(x.size(2)), ow = window_.Out(x.size(3));
    if (oh < 1 || ow < 1) {
      ThrowInvalidArgument("Conv2d: input %s is smaller than the %dx%d kernel", x.Describe(), window_.kernel,
                           window_.kernel);
    }
    const int64_t patch = in_c * window_.kernel * window_.kernel;
    const Tensor<B> cols = unfold_.Patches(InComputeDType(*this, x), window_, true).reshape({n, oh * ow, patch});
    Tensor<B> y = cols.matmul(InComputeDType(*this, w).reshape({out_c, patch}).transpose(0, 1));  // [N, OH*OW, O]
    if (bias_) y = y + InComputeDType(*this, this->param(*bias_));
    return y.reshape({n, oh, ow, out_c}).permute({0, 3, 1, 2});
  }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<Conv2d>(); }

 private:
  Window window_;
  size_t weight_ = 0;
  std::optional<size_t> bias_;
  Unfolder<B> unfold_;
};

// Max over kernel x kernel windows (no padding; a remainder that fits no window is dropped,
// as in PyTorch). stride defaults to the kernel size.
template <Backend B>
class MaxPool2d : public Module<B> {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0) : window_{kernel, stride ? stride : kernel, 0} {
    if (kernel < 1 || window_.stride < 1) {
      ThrowInvalidArgument("MaxPool2d(kernel %d, stride %d): sizes must be positive", kernel, stride);
    }
  }

  Tensor<B> forward(const Tensor<B>& x) override {
    if (x.rank() != 4) ThrowInvalidArgument("MaxPool2d: input %s must be [N, C, H, W]", x.Describe());
    const int64_t n = x.size(0), c = x.size(1), k = window_.kernel;
    const int64_t oh = window_.Out(x.size(2)), ow = window_.Out(x.size(3));
    if (oh < 1 || ow < 1) {
      ThrowInvalidArgument("MaxPool2d: input %s is smaller than the %dx%d window", x.Describe(), k, k);
    }
    if (window_.stride == k) {  // disjoint windows: a reshape, no copy of patches
      return x.slice(2, 0, oh * k).slice(3, 0, ow * k).reshape({n, c, oh, k, ow, k}).max({3, 5});
    }
    return unfold_.Patches(x, window_, false).reshape({n, c, oh, ow, k * k}).max({4});
  }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<MaxPool2d>(); }

 private:
  Window window_;
  Unfolder<B> unfold_;
};

}  // namespace kiln::nn

#endif  // KILN_NN_CONV_H_
