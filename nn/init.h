// Parameter initialisation from a seeded generator (same seed, same weights everywhere).
#ifndef KILN_NN_INIT_H_
#define KILN_NN_INIT_H_

#include <cmath>

#include "tensor/tensor.h"

namespace kiln::nn {

// He et al.: U(-b, b) with b = sqrt(6 / fan_in), for layers followed by ReLU.
template <Backend B>
Tensor<B> KaimingUniform(const Shape& shape, int64_t fan_in, Generator& gen, DType dtype,
                         const typename B::Device& device) {
  const double bound = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in, 1)));
  return Tensor<B>::uniform(shape, -bound, bound, gen, dtype, device);
}

// Glorot & Bengio: U(-b, b) with b = sqrt(6 / (fan_in + fan_out)).
template <Backend B>
Tensor<B> XavierUniform(const Shape& shape, int64_t fan_in, int64_t fan_out, Generator& gen, DType dtype,
                        const typename B::Device& device) {
  const double bound = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in + fan_out, 1)));
  return Tensor<B>::uniform(shape, -bound, bound, gen, dtype, device);
}

}  // namespace kiln::nn

#endif  // KILN_NN_INIT_H_
