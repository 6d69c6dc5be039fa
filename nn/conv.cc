#include "nn/conv.h"

namespace kiln::nn {

TensorData UnfoldIndex(int64_t channels, int64_t height, int64_t width, const Window& w, bool patch_major) {
  const int64_t oh = w.Out(height), ow = w.Out(width), k = w.kernel;
  TensorData index(Shape{oh * ow * channels * k * k}, DType::kI64);
  auto out = index.mutable_values<int64_t>();
  const int64_t zero = channels * height * width;
  int64_t at = 0;
  auto emit = [&](int64_t c, int64_t y, int64_t x) {
    for (int64_t ky = 0; ky < k; ++ky) {
      for (int64_t kx = 0; kx < k; ++kx) {
        const int64_t iy = y * w.stride + ky - w.padding, ix = x * w.stride + kx - w.padding;
        const bool inside = iy >= 0 && iy < height && ix >= 0 && ix < width;
        out[at++] = inside ? (c * height + iy) * width + ix : zero;
      }
    }
  };
  if (patch_major) {
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x)
        for (int64_t c = 0; c < channels; ++c) emit(c, y, x);
  } else {
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) emit(c, y, x);
  }
  return index;
}

}  // namespace kiln::nn
