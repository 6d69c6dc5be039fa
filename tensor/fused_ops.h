// Fused kernels a backend may provide: one pass where composition would take several (the
// transformer's softmax, norms, GELU and cross-entropy). Each is optional and detected by
// concept: a backend that lacks one gets the composition of its plain ops (tensor/fused.h),
// never an error. Autodiff<B> differentiates a fused op with B's fused backward.
//
// Preconditions (checked by tensor/fused.h before any call): float operands of one dtype on
// one device; results are dense (row-major) in the operands' dtype. "Rows" are the last dim.
#ifndef KILN_TENSOR_FUSED_OPS_H_
#define KILN_TENSOR_FUSED_OPS_H_

#include <concepts>
#include <cstdint>

namespace kiln {

// softmax_last(x, log, causal): softmax (log: log-softmax) over the last dim. causal: rank >= 2;
// with [.., sq, sk] the last two dims, row i keeps columns j <= i + (sk - sq) and the others are
// masked (softmax 0, log-softmax -inf); a row with every column masked is NaN.
// softmax_last_backward(y, gy, log, causal): y the forward's output, gy its gradient:
// softmax gx = y * (gy - sum(gy * y)); log-softmax gx = gy - exp(y) * sum(gy), the sums over the
// kept columns (a masked output is a constant); masked gx = 0.
template <class B>
concept FusedSoftmax = requires(const typename B::Primitive& p, bool f) {
  { B::softmax_last(p, f, f) } -> std::same_as<typename B::Primitive>;
  { B::softmax_last_backward(p, p, f, f) } -> std::same_as<typename B::Primitive>;
};

// norm_last(x, weight, bias, eps, rms) over the last dim n; weight and bias are [n] or null.
//   layer norm: mean = sum(x) / n, rstd = 1 / sqrt(sum((x - mean)^2) / n + eps),
//               y = (x - mean) * rstd * weight + bias
//   rms norm:   rstd = 1 / sqrt(sum(x^2) / n + eps), y = x * rstd * weight; mean is rstd again
// mean and rstd have x's shape without its last dim.
// norm_last_backward(gy, x, weight, mean, rstd, rms, bias_grad): with xhat the normalised x and
// g = gy * weight (gy without one),
//   layer gx = rstd * (g - mean(g) - xhat * mean(g * xhat)), rms gx = rstd * (g - xhat * mean(g * xhat))
//   weight_grad = sum over rows of gy * xhat (when weight is given), bias_grad = sum over rows of
//   gy (when asked); the others are default-constructed. The row sums do not depend on the
//   thread count.
template <class P>
struct NormForward {
  P y, mean, rstd;
};
template <class P>
struct NormBackward {
  P x_grad, weight_grad, bias_grad;
};
template <class B>
concept FusedNorm = requires(const typename B::Primitive& p, const typename B::Primitive* maybe, double eps, bool f) {
  { B::norm_last(p, maybe, maybe, eps, f) } -> std::same_as<NormForward<typename B::Primitive>>;
  { B::norm_last_backward(p, p, maybe, p, p, f, f) } -> std::same_as<NormBackward<typename B::Primitive>>;
};

// gelu(x, tanh): exact 0.5 x (1 + erf(x / sqrt 2)), or the tanh form
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))); gelu_backward(x, gy, tanh) = gy * gelu'(x).
template <class B>
concept FusedGelu = requires(const typename B::Primitive& p, bool f) {
  { B::gelu(p, f) } -> std::same_as<typename B::Primitive>;
  { B::gelu_backward(p, p, f) } -> std::same_as<typename B::Primitive>;
};

// cross_entropy_rows(logits [N, C], targets [N] i64, ignore_index, smoothing): per row
// loss = lse - (1 - s) x[y] - (s / C) sum_c x[c] with lse = log sum_c exp(x[c]); 0 for a row whose
// target is ignore_index. A target outside [0, C) that is not ignore_index throws OutOfRange
// naming it. loss and lse are [N].
// cross_entropy_rows_backward(logits, targets, lse, g [N], ignore_index, smoothing):
// g_logits = g[i] * (exp(x - lse) - (1 - s) onehot(y) - s / C), 0 on ignored rows.
template <class P>
struct CrossEntropyForward {
  P loss, lse;
};
template <class B>
concept FusedCrossEntropy = requires(const typename B::Primitive& p, int64_t ignore, double s) {
  { B::cross_entropy_rows(p, p, ignore, s) } -> std::same_as<CrossEntropyForward<typename B::Primitive>>;
  { B::cross_entropy_rows_backward(p, p, p, p, ignore, s) } -> std::same_as<typename B::Primitive>;
};

// Optimizer updates in one pass per parameter (PyTorch's rules); all operands of p's shape.
// sgd_update(p, g, velocity (null on the first step), lr, momentum, weight_decay, nesterov):
//   d = g + weight_decay p; v = momentum v + d (v = d on the first step);
//   p' = p - lr (nesterov ? d + momentum v : v); with momentum 0, p' = p - lr d and velocity is
//   default-constructed.
template <class P>
struct SgdStep {
  P param, velocity;
};
template <class B>
concept FusedSgd = requires(const typename B::Primitive& p, const typename B::Primitive* maybe, double s, bool f) {
  { B::sgd_update(p, p, maybe, s, s, s, f) } -> std::same_as<SgdStep<typename B::Primitive>>;
};

// adamw_update(p, g, exp_avg, exp_avg_sq (both null on the first step: zeros), lr, beta1, beta2,
// eps, weight_decay, c1, c2) with c1 = 1 - beta1^t, c2 = 1 - beta2^t at step t:
//   m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
//   p' = p (1 - lr weight_decay) - (lr / c1) m / (sqrt(v / c2) + eps).
template <class P>
struct AdamWStep {
  P param, exp_avg, exp_avg_sq;
};
template <class B>
concept FusedAdamW = requires(const typename B::Primitive& p, const typename B::Primitive* maybe, double s) {
  { B::adamw_update(p, p, maybe, maybe, s, s, s, s, s, s, s) } -> std::same_as<AdamWStep<typename B::Primitive>>;
};

}  // namespace kiln

#endif  // KILN_TENSOR_FUSED_OPS_H_
