// Mixed precision, scoped to a module tree: parameters stay in their own dtype (f32, the master
// copy the optimizer updates), while under a compute dtype of bf16 or f16 the layers that are
// matmuls (Linear, Conv2d, attention's projections, the GPT head) cast their input and weights
// to it and compute there. Norms compute in their weights' dtype (f32), losses take half logits
// in f32, softmax and reductions of half tensors accumulate in f32 anyway. Gradients flow back
// through the casts, so every parameter gradient arrives in the parameter's dtype.
//   SetPrecision(model, Precision::kBF16);  // this model and its children; nothing global
#ifndef KILN_NN_PRECISION_H_
#define KILN_NN_PRECISION_H_

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "nn/module.h"

namespace kiln::nn {

enum class Precision { kF32, kBF16, kF16 };

// "f32", "bf16", "f16".
const char* PrecisionName(Precision p);
absl::StatusOr<Precision> ParsePrecision(std::string_view name);

// The compute dtype of a precision; none for f32 (the parameters' own dtype, no casts).
inline std::optional<DType> ComputeDType(Precision p) {
  if (p == Precision::kBF16) return DType::kBF16;
  if (p == Precision::kF16) return DType::kF16;
  return std::nullopt;
}

template <Backend B>
void SetPrecision(Module<B>& model, Precision p) {
  model.set_compute_dtype(ComputeDType(p));
}

// `t` in the compute dtype of `module` (floating tensors only; unchanged without a policy).
template <Backend B>
Tensor<B> InComputeDType(const Module<B>& module, const Tensor<B>& t) {
  const std::optional<DType> c = module.compute_dtype();
  return c && IsFloating(t.dtype()) ? t.to(*c) : t;
}

// A loss's operand: half tensors widened to f32, so the loss and its gradient's first step
// are computed and returned in f32.
template <Backend B>
Tensor<B> ForLoss(const Tensor<B>& t) {
  return IsHalf(t.dtype()) ? t.to(DType::kF32) : t;
}

// A norm's input: in its weight's dtype when it has one; else, under a policy, a half input
// widened to f32 (norms compute and return f32 under mixed precision).
template <Backend B>
Tensor<B> ForNorm(const Module<B>& norm, const Tensor<B>& x, const Tensor<B>* weight) {
  if (weight != nullptr) return x.dtype() != weight->dtype() && IsFloating(x.dtype()) ? x.to(weight->dtype()) : x;
  return norm.compute_dtype() ? ForLoss(x) : x;
}

}  // namespace kiln::nn

#endif  // KILN_NN_PRECISION_H_
