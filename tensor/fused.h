// The fused operations of tensor/fused_ops.h on Tensor<B>: arguments checked once here, then
// B's fused kernel where it has one, else the composition of plain ops below (which is also
// the reference the kernels are tested against). Gradients: Autodiff<B> differentiates a fused
// kernel with B's fused backward, and records the composition otherwise.
#ifndef KILN_TENSOR_FUSED_H_
#define KILN_TENSOR_FUSED_H_

#include <array>
#include <cmath>
#include <numbers>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor/fused_ops.h"
#include "tensor/tensor.h"

namespace kiln::fused {

namespace composed {

// Columns a causal mask hides (true) for [.., sq, sk] scores: j > i + (sk - sq).
template <Backend B>
Tensor<B> CausalMask(const Tensor<B>& x) {
  const int64_t sq = x.size(-2), sk = x.size(-1);
  const Tensor<B> rows = Tensor<B>::arange(sq, DType::kI64, x.device()).reshape({sq, 1});
  const Tensor<B> cols = Tensor<B>::arange(sk, DType::kI64, x.device()).reshape({1, sk});
  return cols.gt(rows + (sk - sq));
}

template <Backend B>
Tensor<B> Softmax(const Tensor<B>& x, bool log, bool causal) {
  if (x.size(-1) == 0) return x;  // rows of nothing (max has no identity)
  const Tensor<B> in = causal ? x.masked_fill(CausalMask(x), -INFINITY) : x;
  return internal::ComposedSoftmax(in, in.rank() - 1, log);
}

template <Backend B>
Tensor<B> SoftmaxBackward(const Tensor<B>& y, const Tensor<B>& gy, bool log, bool causal) {
  const Tensor<B> mask = causal ? CausalMask(y) : Tensor<B>();
  const Tensor<B> g = causal ? gy.masked_fill(mask, 0) : gy;  // masked outputs are constants
  const Tensor<B> gx = log ? g - y.exp() * g.sum({-1}, true) : y * (g - (g * y).sum({-1}, true));
  return causal ? gx.masked_fill(mask, 0) : gx;
}

template <Backend B>
NormForward<Tensor<B>> Norm(const Tensor<B>& x, const std::type_identity_t<Tensor<B>>* weight,
                            const std::type_identity_t<Tensor<B>>* bias, double eps, bool rms) {
  const Tensor<B> mean = rms ? Tensor<B>() : x.mean({-1});
  const Tensor<B> centred = rms ? x : x - mean.unsqueeze(-1);
  const Tensor<B> rstd = 1 / ((centred * centred).mean({-1}) + eps).sqrt();
  Tensor<B> y = centred * rstd.unsqueeze(-1);
  if (weight != nullptr) y = y * *weight;
  if (bias != nullptr) y = y + *bias;
  return {y, rms ? rstd : mean, rstd};
}

template <Backend B>
NormBackward<Tensor<B>> NormGrad(const Tensor<B>& gy, const Tensor<B>& x, const std::type_identity_t<Tensor<B>>* weight,
                                 const Tensor<B>& mean, const Tensor<B>& rstd, bool rms, bool bias_grad) {
  const Tensor<B> s = rstd.unsqueeze(-1);
  const Tensor<B> xhat = (rms ? x : x - mean.unsqueeze(-1)) * s;
  const Tensor<B> g = weight != nullptr ? gy * *weight : gy;
  Tensor<B> inner = g - xhat * (g * xhat).mean({-1}, true);
  if (!rms) inner = inner - g.mean({-1}, true);
  NormBackward<Tensor<B>> out{s * inner, {}, {}};
  std::vector<int64_t> rows(x.rank() - 1);
  for (int64_t d = 0; d + 1 < x.rank(); ++d) rows[d] = d;
  const auto over_rows = [&](const Tensor<B>& t) { return rows.empty() ? t : t.sum(rows); };
  if (weight != nullptr) out.weight_grad = over_rows(gy * xhat);
  if (bias_grad) out.bias_grad = over_rows(gy);
  return out;
}

inline constexpr double kSqrt2OverPi = 0.79788456080286535588;
inline constexpr double kGeluCubic = 0.044715;

template <Backend B>
Tensor<B> Gelu(const Tensor<B>& x, bool tanh) {
  if (tanh) return 0.5 * x * (1 + (kSqrt2OverPi * (x + kGeluCubic * x * x * x)).tanh());
  return 0.5 * x * (1 + (x * (std::numbers::sqrt2 / 2)).erf());
}

template <Backend B>
Tensor<B> GeluBackward(const Tensor<B>& x, const Tensor<B>& gy, bool tanh) {
  if (tanh) {
    const Tensor<B> t = (kSqrt2OverPi * (x + kGeluCubic * x * x * x)).tanh();
    return gy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * kGeluCubic * x * x));
  }
  const double inv_sqrt_2pi = 0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2;
  return gy * (0.5 * (1 + (x * (std::numbers::sqrt2 / 2)).erf()) + x * inv_sqrt_2pi * (-0.5 * x * x).exp());
}

template <Backend B>
CrossEntropyForward<Tensor<B>> CrossEntropyRows(const Tensor<B>& logits, const Tensor<B>& targets, int64_t ignore_index,
                                                double smoothing) {
  const Tensor<B> keep = targets.ne(ignore_index);
  // Ignored rows look up class 0, then count for nothing.
  const Tensor<B> safe = Tensor<B>::where(keep, targets, targets.scalar_like(0));
  const Tensor<B> m = logits.max({1}, true).detach();
  const Tensor<B> lse = (logits - m).exp().sum({1}).log() + m.squeeze(1);
  Tensor<B> loss = lse - (1 - smoothing) * logits.gather(1, safe.unsqueeze(1)).squeeze(1);
  if (smoothing != 0) loss = loss - smoothing * logits.mean({1});
  return {Tensor<B>::where(keep, loss, loss.scalar_like(0)), lse};
}

template <Backend B>
Tensor<B> CrossEntropyRowsBackward(const Tensor<B>& logits, const Tensor<B>& targets, const Tensor<B>& lse,
                                   const Tensor<B>& g, int64_t ignore_index, double smoothing) {
  const int64_t classes = logits.size(1);
  const Tensor<B> keep = targets.ne(ignore_index).unsqueeze(1);
  const Tensor<B> ids = Tensor<B>::arange(classes, DType::kI64, logits.device()).reshape({1, classes});
  const Tensor<B> onehot = ids.eq(targets.unsqueeze(1)).to(logits.dtype());
  const Tensor<B> gx =
      g.unsqueeze(1) * ((logits - lse.unsqueeze(1)).exp() - (1 - smoothing) * onehot - smoothing / classes);
  return Tensor<B>::where(keep, gx, gx.scalar_like(0));
}

template <Backend B>
SgdStep<Tensor<B>> SgdUpdate(const Tensor<B>& p, const Tensor<B>& g, const std::type_identity_t<Tensor<B>>* velocity,
                             double lr, double momentum, double weight_decay, bool nesterov) {
  const Tensor<B> d = weight_decay != 0 ? g + weight_decay * p : g;
  if (momentum == 0) return {p - lr * d, {}};
  const Tensor<B> v = velocity != nullptr ? momentum * *velocity + d : d;
  return {p - lr * (nesterov ? d + momentum * v : v), v};
}

template <Backend B>
AdamWStep<Tensor<B>> AdamWUpdate(const Tensor<B>& p, const Tensor<B>& g, const std::type_identity_t<Tensor<B>>* exp_avg,
                                 const std::type_identity_t<Tensor<B>>* exp_avg_sq, double lr, double beta1,
                                 double beta2, double eps, double weight_decay, double c1, double c2) {
  const Tensor<B> m = exp_avg ? beta1 * *exp_avg + (1 - beta1) * g : (1 - beta1) * g;
  const Tensor<B> v = exp_avg_sq ? beta2 * *exp_avg_sq + (1 - beta2) * g * g : (1 - beta2) * g * g;
  const Tensor<B> decayed = weight_decay == 0 ? p : p * (1 - lr * weight_decay);
  return {decayed - (lr / c1) * m / ((v / c2).sqrt() + eps), m, v};
}

}  // namespace composed

// softmax (log: log-softmax) over the last dim; causal: over [.., sq, sk] scores, row i sees
// columns j <= i + (sk - sq).
template <Backend B>
Tensor<B> softmax_last(const Tensor<B>& x, bool log, bool causal) {
  if (!IsFloating(x.dtype()) || x.rank() < (causal ? 2 : 1)) {
    ThrowInvalidArgument("%s: needs a floating tensor of rank >= %d, got %s", log ? "log_softmax" : "softmax",
                         causal ? 2 : 1, x.Describe());
  }
  if constexpr (FusedSoftmax<B>) {
    return Tensor<B>(B::softmax_last(x.primitive(), log, causal));
  } else {
    return composed::Softmax(x, log, causal);
  }
}

// Layer norm (rms: RMSNorm) over the last dim, with optional weight and bias of that dim's size.
// Returns y and the per-row statistics.
template <Backend B>
NormForward<Tensor<B>> norm_last(const Tensor<B>& x, const std::type_identity_t<Tensor<B>>* weight,
                                 const std::type_identity_t<Tensor<B>>* bias, double eps, bool rms) {
  const char* what = rms ? "rms_norm" : "layer_norm";
  if (!IsFloating(x.dtype()) || x.rank() < 1) {
    ThrowInvalidArgument("%s: needs a floating tensor of rank >= 1, got %s", what, x.Describe());
  }
  for (const Tensor<B>* p : {weight, bias}) {
    if (p != nullptr && (p->shape() != Shape({x.size(-1)}) || p->dtype() != x.dtype() || p->device() != x.device())) {
      ThrowInvalidArgument("%s: weight and bias must be %s[%d] on %s like the last dim of x, got %s", what,
                           DTypeName(x.dtype()), x.size(-1), x.device().ToString(), p->Describe());
    }
  }
  if (!(eps >= 0)) ThrowInvalidArgument("%s: eps %g must be >= 0", what, eps);
  if constexpr (FusedNorm<B>) {
    const auto f = B::norm_last(x.primitive(), weight ? &weight->primitive() : nullptr,
                                bias ? &bias->primitive() : nullptr, eps, rms);
    return {Tensor<B>(f.y), Tensor<B>(f.mean), Tensor<B>(f.rstd)};
  } else {
    return composed::Norm(x, weight, bias, eps, rms);
  }
}

// GELU, exact (erf) or in the tanh form.
template <Backend B>
Tensor<B> gelu(const Tensor<B>& x, bool tanh = false) {
  if (!IsFloating(x.dtype())) ThrowInvalidArgument("gelu: needs a floating tensor, got %s", x.Describe());
  if constexpr (FusedGelu<B>) {
    return Tensor<B>(B::gelu(x.primitive(), tanh));
  } else {
    return composed::Gelu(x, tanh);
  }
}

// Per-row cross-entropy of logits [N, C] against integer targets [N] (see fused_ops.h).
template <Backend B>
CrossEntropyForward<Tensor<B>> cross_entropy_rows(const Tensor<B>& logits, const Tensor<B>& targets,
                                                  int64_t ignore_index = -100, double smoothing = 0) {
  if (logits.rank() != 2 || !IsFloating(logits.dtype()) || targets.rank() != 1 || IsFloating(targets.dtype()) ||
      targets.dtype() == DType::kBool || targets.size(0) != logits.size(0) || targets.device() != logits.device() ||
      (logits.size(1) == 0 && logits.size(0) > 0)) {
    ThrowInvalidArgument("cross_entropy: needs logits [N, C >= 1] and integer targets [N] on one device, got %s and %s",
                         logits.Describe(), targets.Describe());
  }
  if (!(smoothing >= 0 && smoothing <= 1)) {
    ThrowInvalidArgument("cross_entropy: label_smoothing %g must be in [0, 1]", smoothing);
  }
  const Tensor<B> ids = targets.to(DType::kI64);
  if constexpr (FusedCrossEntropy<B>) {
    const auto f = B::cross_entropy_rows(logits.primitive(), ids.primitive(), ignore_index, smoothing);
    return {Tensor<B>(f.loss), Tensor<B>(f.lse)};
  } else {
    return composed::CrossEntropyRows(logits, ids, ignore_index, smoothing);
  }
}

namespace composed {

// q, k and v of packed projections [b, s, 3 d], each [b, heads, s, hd].
template <Backend B>
std::array<Tensor<B>, 3> AttentionHeads(const Tensor<B>& qkv, int64_t heads) {
  const int64_t b = qkv.size(0), s = qkv.size(1), d = qkv.size(2) / 3;
  const Tensor<B> parts = qkv.reshape({b, s, 3, heads, d / heads}).permute({2, 0, 3, 1, 4});
  return {parts.slice(0, 0, 1).squeeze(0), parts.slice(0, 1, 2).squeeze(0), parts.slice(0, 2, 3).squeeze(0)};
}

template <Backend B>
AttentionForward<Tensor<B>> CausalAttention(const Tensor<B>& qkv, int64_t heads) {
  const auto [q, k, v] = AttentionHeads(qkv, heads);
  const double scale = 1 / std::sqrt(static_cast<double>(q.size(3)));
  Tensor<B> weights = softmax_last(q.matmul(k.transpose(2, 3)) * scale, false, true);
  Tensor<B> y = weights.matmul(v).permute({0, 2, 1, 3}).reshape({qkv.size(0), qkv.size(1), qkv.size(2) / 3});
  return {std::move(y), std::move(weights)};
}

template <Backend B>
Tensor<B> CausalAttentionBackward(const Tensor<B>& qkv, const Tensor<B>& weights, const Tensor<B>& gy, int64_t heads) {
  const auto [q, k, v] = AttentionHeads(qkv, heads);
  const int64_t b = qkv.size(0), s = qkv.size(1), hd = q.size(3);
  const Tensor<B> g = gy.reshape({b, s, heads, hd}).permute({0, 2, 1, 3});
  const Tensor<B> gv = weights.transpose(2, 3).matmul(g);
  const Tensor<B> gw = g.matmul(v.transpose(2, 3));
  Tensor<B> gscores;
  if constexpr (FusedSoftmax<B>) {
    gscores = Tensor<B>(B::softmax_last_backward(weights.primitive(), gw.primitive(), false, true));
  } else {
    gscores = SoftmaxBackward(weights, gw, false, true);
  }
  gscores = gscores * (1 / std::sqrt(static_cast<double>(hd)));
  const Tensor<B> gq = gscores.matmul(k), gk = gscores.transpose(2, 3).matmul(q);
  return Tensor<B>::cat(std::vector<Tensor<B>>{gq.unsqueeze(0), gk.unsqueeze(0), gv.unsqueeze(0)}, 0)
      .permute({1, 3, 0, 2, 4})
      .reshape(qkv.shape().dims());
}

template <Backend B>
Tensor<B> Linear(const Tensor<B>& x, const Tensor<B>& weight, const std::type_identity_t<Tensor<B>>* bias) {
  const Tensor<B> y = x.matmul(weight.transpose(0, 1));
  return bias != nullptr ? y + *bias : y;
}

}  // namespace composed

// x weight^T + bias (nn::Linear's product), x [..., in], weight [out, in], bias [out] or null.
template <Backend B>
Tensor<B> linear(const Tensor<B>& x, const Tensor<B>& weight, const std::type_identity_t<Tensor<B>>* bias) {
  const bool fits = IsFloating(x.dtype()) && x.rank() >= 1 && weight.rank() == 2 && x.size(-1) == weight.size(1) &&
                    weight.dtype() == x.dtype() && weight.device() == x.device() &&
                    (bias == nullptr || (bias->shape() == Shape({weight.size(0)}) && bias->dtype() == x.dtype() &&
                                         bias->device() == x.device()));
  if (!fits) {
    ThrowInvalidArgument(
        "linear: needs x [..., in], weight [out, in] and bias [out] of one float dtype on one device, "
        "got %s, %s and %s",
        x.Describe(), weight.Describe(), bias ? bias->Describe() : std::string("no bias"));
  }
  if constexpr (FusedLinear<B>) {
    return Tensor<B>(B::linear(x.primitive(), weight.primitive(), bias ? &bias->primitive() : nullptr));
  } else {
    return composed::Linear(x, weight, bias);
  }
}

// GPT's causal self-attention over packed projections qkv [b, s, 3 d] (op_table.h): y [b, s, d]
// and the softmax weights [b, heads, s, s].
template <Backend B>
AttentionForward<Tensor<B>> causal_attention(const Tensor<B>& qkv, int64_t heads) {
  if (!IsFloating(qkv.dtype()) || qkv.rank() != 3 || heads < 1 || qkv.size(2) < 3 * heads ||
      qkv.size(2) % (3 * heads) != 0) {
    ThrowInvalidArgument(
        "causal_attention: needs a floating qkv [batch, seq, 3 x heads x head_dim], got %s for %d heads",
        qkv.Describe(), heads);
  }
  if constexpr (FusedAttention<B>) {
    const auto f = B::causal_attention(qkv.primitive(), heads);
    return {Tensor<B>(f.y), Tensor<B>(f.weights)};
  } else {
    return composed::CausalAttention(qkv, heads);
  }
}

namespace internal {
// The optimizer operands all have the parameter's shape, dtype and device.
template <Backend B>
void CheckLikeParameter(const char* what, const Tensor<B>& p, std::initializer_list<const Tensor<B>*> others) {
  if (!IsFloating(p.dtype())) ThrowInvalidArgument("%s: parameter %s is not floating", what, p.Describe());
  for (const Tensor<B>* t : others) {
    if (t != nullptr && (t->shape() != p.shape() || t->dtype() != p.dtype() || t->device() != p.device())) {
      ThrowInvalidArgument("%s: %s does not match the parameter %s", what, t->Describe(), p.Describe());
    }
  }
}
}  // namespace internal

// One SGD step of a parameter (fused_ops.h).
template <Backend B>
SgdStep<Tensor<B>> sgd_update(const Tensor<B>& p, const Tensor<B>& g, const std::type_identity_t<Tensor<B>>* velocity,
                              double lr, double momentum, double weight_decay, bool nesterov) {
  internal::CheckLikeParameter<B>("sgd_update", p, {&g, velocity});
  if constexpr (FusedSgd<B>) {
    auto s = B::sgd_update(p.primitive(), g.primitive(), velocity ? &velocity->primitive() : nullptr, lr, momentum,
                           weight_decay, nesterov);
    return {Tensor<B>(std::move(s.param)), Tensor<B>(std::move(s.velocity))};
  } else {
    return composed::SgdUpdate(p, g, velocity, lr, momentum, weight_decay, nesterov);
  }
}

// One AdamW step of a parameter (fused_ops.h).
template <Backend B>
AdamWStep<Tensor<B>> adamw_update(const Tensor<B>& p, const Tensor<B>& g,
                                  const std::type_identity_t<Tensor<B>>* exp_avg,
                                  const std::type_identity_t<Tensor<B>>* exp_avg_sq, double lr, double beta1,
                                  double beta2, double eps, double weight_decay, double c1, double c2) {
  internal::CheckLikeParameter<B>("adamw_update", p, {&g, exp_avg, exp_avg_sq});
  if ((exp_avg == nullptr) != (exp_avg_sq == nullptr)) {
    ThrowInvalidArgument("adamw_update: needs both moments or neither, for parameter %s", p.Describe());
  }
  if constexpr (FusedAdamW<B>) {
    auto s =
        B::adamw_update(p.primitive(), g.primitive(), exp_avg ? &exp_avg->primitive() : nullptr,
                        exp_avg_sq ? &exp_avg_sq->primitive() : nullptr, lr, beta1, beta2, eps, weight_decay, c1, c2);
    return {Tensor<B>(std::move(s.param)), Tensor<B>(std::move(s.exp_avg)), Tensor<B>(std::move(s.exp_avg_sq))};
  } else {
    return composed::AdamWUpdate(p, g, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, c1, c2);
  }
}

}  // namespace kiln::fused

#endif  // KILN_TENSOR_FUSED_H_
