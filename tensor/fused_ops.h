// Fused kernels a backend may provide: one pass where composition would take several (the
// transformer's softmax, norms, GELU, cross-entropy, causal attention and biased linear layer) and
// the optimizer updates. Their rows,
// with what each computes, are in tensor/op_table.h (KILN_FUSED_OPS). Each group is optional and
// detected by its concept below: a backend that lacks one gets the composition of its plain ops
// (tensor/fused.h), never an error. Autodiff<B> differentiates a fused kernel with B's fused
// backward.
#ifndef KILN_TENSOR_FUSED_OPS_H_
#define KILN_TENSOR_FUSED_OPS_H_

#include <concepts>
#include <cstdint>

#include "tensor/backend.h"
#include "tensor/op_table.h"

namespace kiln {

// The results of several tensors. Map(f) gives the same result with f applied to each tensor
// (a Dispatch primitive from a backend's, a Tensor<B> from a primitive, ...).
template <class P>
struct NormForward {
  P y, mean, rstd;
  template <class F>
  auto Map(F f) const -> NormForward<decltype(f(y))> {
    return {f(y), f(mean), f(rstd)};
  }
};
template <class P>
struct NormBackward {
  P x_grad, weight_grad, bias_grad;
  template <class F>
  auto Map(F f) const -> NormBackward<decltype(f(x_grad))> {
    return {f(x_grad), f(weight_grad), f(bias_grad)};
  }
};
template <class P>
struct CrossEntropyForward {
  P loss, lse;
  template <class F>
  auto Map(F f) const -> CrossEntropyForward<decltype(f(loss))> {
    return {f(loss), f(lse)};
  }
};
template <class P>
struct AttentionForward {
  P y, weights;
  template <class F>
  auto Map(F f) const -> AttentionForward<decltype(f(y))> {
    return {f(y), f(weights)};
  }
};
template <class P>
struct SgdStep {
  P param, velocity;
  template <class F>
  auto Map(F f) const -> SgdStep<decltype(f(param))> {
    return {f(param), f(velocity)};
  }
};
template <class P>
struct AdamWStep {
  P param, exp_avg, exp_avg_sq;
  template <class F>
  auto Map(F f) const -> AdamWStep<decltype(f(param))> {
    return {f(param), f(exp_avg), f(exp_avg_sq)};
  }
};

// has_op::softmax_last<B>, ...: B's op has the row's exact signature (tensor/backend.h).
#define KILN_FUSED_OP_REQUIREMENT(Group, Result, name, params, args, composition) \
  KILN_OP_REQUIREMENT(Result, name, params, args)
#define KILN_HAS_FUSED_OP(Group, Result, name, params, args, composition) has_op::name<B>&&

KILN_FUSED_OPS(KILN_FUSED_OP_REQUIREMENT)

// The groups of a backend that wraps another (Autodiff<B> specialises this: its inner backend's
// groups). A wrapper declares each group's ops with a `requires` clause on its inner backend, and
// GCC 12 lets `&Wrapper::op` name such a member even where the clause is false, so the concepts
// below ask this too; every other backend answers true.
template <class B>
struct WrappedFusedGroups {
  static constexpr bool softmax = true, norm = true, gelu = true, cross_entropy = true, attention = true, linear = true,
                        sgd = true, adamw = true;
};

// A backend has a group when it has every op of the group's rows.
template <class B>
concept FusedSoftmax = KILN_FUSED_SOFTMAX_OPS(KILN_HAS_FUSED_OP)
WrappedFusedGroups<B>::softmax;
template <class B>
concept FusedNorm = KILN_FUSED_NORM_OPS(KILN_HAS_FUSED_OP)
WrappedFusedGroups<B>::norm;
template <class B>
concept FusedGelu = KILN_FUSED_GELU_OPS(KILN_HAS_FUSED_OP)
WrappedFusedGroups<B>::gelu;
template <class B>
concept FusedCrossEntropy = KILN_FUSED_CROSS_ENTROPY_OPS(KILN_HAS_FUSED_OP)
WrappedFusedGroups<B>::cross_entropy;
template <class B>
concept FusedAttention = KILN_FUSED_ATTENTION_OPS(KILN_HAS_FUSED_OP)
WrappedFusedGroups<B>::attention;
template <class B>
concept FusedLinear = KILN_FUSED_LINEAR_OPS(KILN_HAS_FUSED_OP)
WrappedFusedGroups<B>::linear;
template <class B>
concept FusedSgd = KILN_FUSED_SGD_OPS(KILN_HAS_FUSED_OP)
WrappedFusedGroups<B>::sgd;
template <class B>
concept FusedAdamW = KILN_FUSED_ADAMW_OPS(KILN_HAS_FUSED_OP)
WrappedFusedGroups<B>::adamw;

}  // namespace kiln

#endif  // KILN_TENSOR_FUSED_OPS_H_
