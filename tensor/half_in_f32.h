// HalfInF32<B>: bf16 and f16 ops for a backend B whose kernels compute in f32 and f64 only. Each op
// widens its half operands to f32 with B::cast, runs B's f32 kernel and rounds the result once
// back to the operands' dtype: the f32 arithmetic of the half values, rounded to nearest even,
// which is what the native half kernels of other backends compute too. Reductions, matmul,
// softmax, norms and losses therefore accumulate in f32. A backend calls these from its ops
// for half operands and keeps its own kernels for the hot ones where that pays.
#ifndef KILN_TENSOR_HALF_IN_F32_H_
#define KILN_TENSOR_HALF_IN_F32_H_

#include <optional>

#include "absl/types/span.h"
#include "tensor/dtype.h"
#include "tensor/fused_ops.h"
#include "tensor/ops.h"
#include "tensor/shape.h"

namespace kiln {

template <class B>
struct HalfInF32 {
  using P = typename B::Primitive;

  static P Up(const P& p) { return IsHalf(B::dtype(p)) ? B::cast(p, DType::kF32) : p; }
  static P Down(const P& p, DType dtype) { return B::dtype(p) == dtype ? p : B::cast(p, dtype); }
  // Widens an optional operand; `storage` keeps the widened copy alive.
  static const P* Up(const P* p, std::optional<P>& storage) {
    if (!p) return nullptr;
    return &storage.emplace(Up(*p));
  }

  static P unary(UnaryOp op, const P& p) { return Down(B::unary(op, Up(p)), B::dtype(p)); }
  static P binary(BinaryOp op, const P& a, const P& b) {
    P out = B::binary(op, Up(a), Up(b));
    return IsComparison(op) ? out : Down(out, B::dtype(a));
  }
  static P reduce(ReduceOp op, const P& p, absl::Span<const int64_t> dims, bool keepdim) {
    return Down(B::reduce(op, Up(p), dims, keepdim), B::dtype(p));
  }
  static P argmax(const P& p, int64_t dim, bool keepdim) { return B::argmax(Up(p), dim, keepdim); }
  static P matmul(const P& a, const P& b) { return Down(B::matmul(Up(a), Up(b)), B::dtype(a)); }
  static P scatter_add(const P& src, int64_t dim, const P& index, const Shape& shape) {
    return Down(B::scatter_add(Up(src), dim, index, shape), B::dtype(src));
  }

  // Fused kernels. Their statistics (norm mean and rstd, the cross-entropy's lse) are rounded
  // to the operands' dtype too, as the composition of plain ops would give them; mixed
  // precision keeps norms and losses in f32 anyway (nn/precision.h).
  static P softmax_last(const P& x, bool log, bool causal) {
    return Down(B::softmax_last(Up(x), log, causal), B::dtype(x));
  }
  static P softmax_last_backward(const P& y, const P& gy, bool log, bool causal) {
    return Down(B::softmax_last_backward(Up(y), Up(gy), log, causal), B::dtype(gy));
  }
  static NormForward<P> norm_last(const P& x, const P* weight, const P* bias, double eps, bool rms) {
    std::optional<P> w, b;
    const NormForward<P> f = B::norm_last(Up(x), Up(weight, w), Up(bias, b), eps, rms);
    return {Down(f.y, B::dtype(x)), Down(f.mean, B::dtype(x)), Down(f.rstd, B::dtype(x))};
  }
  static NormBackward<P> norm_last_backward(const P& gy, const P& x, const P* weight, const P& mean, const P& rstd,
                                            bool rms, bool bias_grad) {
    std::optional<P> w;
    NormBackward<P> d = B::norm_last_backward(Up(gy), Up(x), Up(weight, w), Up(mean), Up(rstd), rms, bias_grad);
    d.x_grad = Down(d.x_grad, B::dtype(x));
    if (weight) d.weight_grad = Down(d.weight_grad, B::dtype(*weight));
    if (bias_grad) d.bias_grad = Down(d.bias_grad, B::dtype(gy));
    return d;
  }
  static P gelu(const P& x, bool tanh) { return Down(B::gelu(Up(x), tanh), B::dtype(x)); }
  static P gelu_backward(const P& x, const P& gy, bool tanh) {
    return Down(B::gelu_backward(Up(x), Up(gy), tanh), B::dtype(gy));
  }
  static CrossEntropyForward<P> cross_entropy_rows(const P& logits, const P& targets, int64_t ignore_index,
                                                   double smoothing) {
    const CrossEntropyForward<P> f = B::cross_entropy_rows(Up(logits), targets, ignore_index, smoothing);
    return {Down(f.loss, B::dtype(logits)), Down(f.lse, B::dtype(logits))};
  }
  static P cross_entropy_rows_backward(const P& logits, const P& targets, const P& lse, const P& g,
                                       int64_t ignore_index, double smoothing) {
    return Down(B::cross_entropy_rows_backward(Up(logits), targets, Up(lse), Up(g), ignore_index, smoothing),
                B::dtype(logits));
  }

  static AttentionForward<P> causal_attention(const P& qkv, int64_t heads) {
    const AttentionForward<P> f = B::causal_attention(Up(qkv), heads);
    return {Down(f.y, B::dtype(qkv)), Down(f.weights, B::dtype(qkv))};
  }
  static P causal_attention_backward(const P& qkv, const P& weights, const P& gy, int64_t heads) {
    return Down(B::causal_attention_backward(Up(qkv), Up(weights), Up(gy), heads), B::dtype(qkv));
  }

  static P linear(const P& x, const P& weight, const P* bias) {
    std::optional<P> b;
    return Down(B::linear(Up(x), Up(weight), Up(bias, b)), B::dtype(x));
  }

  // Optimizer updates in f32; the new state is rounded to each input's dtype.
  static SgdStep<P> sgd_update(const P& p, const P& g, const P* velocity, double lr, double momentum,
                               double weight_decay, bool nesterov) {
    std::optional<P> v;
    SgdStep<P> s = B::sgd_update(Up(p), Up(g), Up(velocity, v), lr, momentum, weight_decay, nesterov);
    s.param = Down(s.param, B::dtype(p));
    if (momentum != 0) s.velocity = Down(s.velocity, velocity ? B::dtype(*velocity) : B::dtype(p));
    return s;
  }
  static AdamWStep<P> adamw_update(const P& p, const P& g, const P* exp_avg, const P* exp_avg_sq, double lr,
                                   double beta1, double beta2, double eps, double weight_decay, double c1, double c2) {
    std::optional<P> m, v;
    AdamWStep<P> s =
        B::adamw_update(Up(p), Up(g), Up(exp_avg, m), Up(exp_avg_sq, v), lr, beta1, beta2, eps, weight_decay, c1, c2);
    s.param = Down(s.param, B::dtype(p));
    s.exp_avg = Down(s.exp_avg, exp_avg ? B::dtype(*exp_avg) : B::dtype(p));
    s.exp_avg_sq = Down(s.exp_avg_sq, exp_avg_sq ? B::dtype(*exp_avg_sq) : B::dtype(p));
    return s;
  }
};

}  // namespace kiln

#endif  // KILN_TENSOR_HALF_IN_F32_H_
