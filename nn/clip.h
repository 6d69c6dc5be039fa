// ClipGradNorm: scales a module's gradients so that their global L2 norm is at most max_norm
// (torch.nn.utils.clip_grad_norm_), the usual guard of transformer training.
#ifndef KILN_NN_CLIP_H_
#define KILN_NN_CLIP_H_

#include <cmath>

#include "autodiff/autodiff.h"
#include "nn/module.h"

namespace kiln::nn {

// What gradients of global L2 norm `norm` are multiplied by to clip them to max_norm (>= 1:
// they are left alone).
inline double ClipFactor(double norm, double max_norm) { return max_norm / (norm + 1e-6); }

// Multiplies every parameter gradient in `grads` by min(1, max_norm / (norm + 1e-6)), where norm
// is the L2 norm of all of them together, summed in f64 in parameter order (so replicas that
// hold the same gradients scale by the same factor, to the bit). Returns that norm (before
// clipping). InvalidArgument for a max_norm that is not a positive finite number.
template <Backend B>
double ClipGradNorm(Module<Autodiff<B>>& module, Gradients<B>& grads, double max_norm) {
  if (!(max_norm > 0 && std::isfinite(max_norm))) {
    ThrowInvalidArgument("ClipGradNorm: max_norm %g must be a positive number", max_norm);
  }
  NoGradScope no_grad;
  std::optional<Tensor<B>> sum;
  for (auto& [name, p] : module.named_parameters()) {
    const auto g = grads.get(*p);
    if (!g) continue;
    const Tensor<B> g64 = g->to(DType::kF64);
    const Tensor<B> part = (g64 * g64).sum();
    sum = sum ? *sum + part : part;
  }
  if (!sum) return 0;
  const double norm = std::sqrt(sum->template item<double>());
  const double factor = ClipFactor(norm, max_norm);
  if (factor >= 1) return norm;
  for (auto& [name, p] : module.named_parameters()) {
    const auto g = grads.get(*p);
    if (g) grads.Set(p->primitive().node->id, (*g * factor).primitive());
  }
  return norm;
}

}  // namespace kiln::nn

#endif  // KILN_NN_CLIP_H_
