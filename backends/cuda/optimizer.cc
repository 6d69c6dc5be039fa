// Optimizer updates. f32 and f64 are the composition of element-wise ops (tensor/fused.h's
// composed::), as before this file existed; bf16 and f16 parameters and states are widened to
// f32, updated there and rounded once each (HalfInF32), as on the CPU: composing the update
// from half ops would round after every one of them.
#include "backends/cuda/cuda_backend.h"
#include "tensor/fused.h"
#include "tensor/half_in_f32.h"

namespace kiln {

SgdStep<Cuda::Primitive> Cuda::sgd_update(const Primitive& p, const Primitive& g, const Primitive* velocity, double lr,
                                          double momentum, double weight_decay, bool nesterov) {
  if (IsHalf(p.dtype)) return HalfInF32<Cuda>::sgd_update(p, g, velocity, lr, momentum, weight_decay, nesterov);
  const Tensor<Cuda> v = velocity ? Tensor<Cuda>(*velocity) : Tensor<Cuda>();
  SgdStep<Tensor<Cuda>> s = fused::composed::SgdUpdate(Tensor<Cuda>(p), Tensor<Cuda>(g), velocity ? &v : nullptr, lr,
                                                       momentum, weight_decay, nesterov);
  return {s.param.primitive(), s.velocity.primitive()};
}

AdamWStep<Cuda::Primitive> Cuda::adamw_update(const Primitive& p, const Primitive& g, const Primitive* exp_avg,
                                              const Primitive* exp_avg_sq, double lr, double beta1, double beta2,
                                              double eps, double weight_decay, double c1, double c2) {
  if (IsHalf(p.dtype)) {
    return HalfInF32<Cuda>::adamw_update(p, g, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, c1, c2);
  }
  const Tensor<Cuda> m = exp_avg ? Tensor<Cuda>(*exp_avg) : Tensor<Cuda>();
  const Tensor<Cuda> v = exp_avg_sq ? Tensor<Cuda>(*exp_avg_sq) : Tensor<Cuda>();
  AdamWStep<Tensor<Cuda>> s =
      fused::composed::AdamWUpdate(Tensor<Cuda>(p), Tensor<Cuda>(g), exp_avg ? &m : nullptr, exp_avg_sq ? &v : nullptr,
                                   lr, beta1, beta2, eps, weight_decay, c1, c2);
  return {s.param.primitive(), s.exp_avg.primitive(), s.exp_avg_sq.primitive()};
}

}  // namespace kiln
