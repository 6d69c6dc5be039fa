// nn::functional: the layers of a transformer as free functions on Tensor<B>, usable with
// weights the caller holds; the modules call these. Each is composed of Tensor<B> operations,
// so it runs, and differentiates, on every backend (plain, Autodiff<B>, Dispatch), and takes a
// backend's fused kernel where it has one (tensor/fused.h: softmax, norms, GELU, cross-entropy).
// Argument errors are kiln::Error naming the shapes.
#ifndef KILN_NN_FUNCTIONAL_H_
#define KILN_NN_FUNCTIONAL_H_

#include <cmath>
#include <numbers>
#include <optional>

#include "tensor/random.h"
#include "tensor/tensor.h"

namespace kiln::nn::functional {

// y = x weight^T + bias: x [..., in], weight [out, in] (PyTorch's layout), bias [out].
template <Backend B>
Tensor<B> linear(const Tensor<B>& x, const Tensor<B>& weight, const Tensor<B>* bias = nullptr) {
  if (weight.rank() != 2 || x.rank() < 1 || x.size(-1) != weight.size(1) ||
      (bias != nullptr && (bias->rank() != 1 || bias->size(0) != weight.size(0)))) {
    ThrowInvalidArgument("linear: x %s, weight %s%s do not fit (x [..., in], weight [out, in], bias [out])",
                         x.Describe(), weight.Describe(), bias ? ", bias " + bias->Describe() : std::string());
  }
  Tensor<B> y =
      x.rank() == 2 ? x.matmul(weight.transpose(0, 1)) : x.reshape({-1, x.size(-1)}).matmul(weight.transpose(0, 1));
  if (bias != nullptr) y = y + *bias;
  if (x.rank() == 2) return y;
  Dims dims(x.shape().dims().begin(), x.shape().dims().end());
  dims.back() = weight.size(0);
  return y.reshape(dims);
}

// The rows of weight [vocab, dim] at ids (integers of any shape): ids.shape + [dim]. An id
// outside [0, vocab) is an error naming it. The gradient of weight sums the rows of repeated
// ids (a scatter-add).
template <Backend B>
Tensor<B> embedding(const Tensor<B>& ids, const Tensor<B>& weight) {
  if (weight.rank() != 2 || IsFloating(ids.dtype())) {
    ThrowInvalidArgument("embedding: needs integer ids and a weight [vocab, dim], got ids %s and weight %s",
                         ids.Describe(), weight.Describe());
  }
  Dims dims(ids.shape().dims().begin(), ids.shape().dims().end());
  dims.push_back(weight.size(1));
  return weight.index_select(0, ids.reshape({-1})).reshape(dims);
}

namespace internal {
// The dims a norm reduces: the last normalized.size() dims of x, which must be `normalized`.
inline std::vector<int64_t> NormDims(const Shape& x, const Dims& normalized, const char* what) {
  const int64_t k = static_cast<int64_t>(normalized.size());
  bool fits = k >= 1 && x.rank() >= k;
  for (int64_t i = 0; fits && i < k; ++i) fits = x[x.rank() - k + i] == normalized[i];
  if (!fits) {
    ThrowInvalidArgument("%s: the last dims of x %s are not the normalized shape %s", what, x.ToString(),
                         Shape(normalized).ToString());
  }
  std::vector<int64_t> dims;
  for (int64_t i = x.rank() - k; i < x.rank(); ++i) dims.push_back(i);
  return dims;
}

template <Backend B>
void CheckAffine(const char* what, const Tensor<B>* t, const Dims& normalized) {
  if (t != nullptr && t->shape() != Shape(normalized)) {
    ThrowInvalidArgument("%s: %s does not match the normalized shape %s", what, t->Describe(),
                         Shape(normalized).ToString());
  }
}

// The norm over the last normalized.size() dims as one row each (the fused kernel's form).
template <Backend B>
Tensor<B> NormOverRows(const Tensor<B>& x, const Dims& normalized, const Tensor<B>* weight, const Tensor<B>* bias,
                       double eps, bool rms) {
  if (normalized.size() == 1) return fused::norm_last(x, weight, bias, eps, rms).y;
  int64_t n = 1;
  for (int64_t d : normalized) n *= d;
  const Tensor<B> w = weight ? weight->reshape({n}) : Tensor<B>(), b = bias ? bias->reshape({n}) : Tensor<B>();
  return fused::norm_last(x.reshape({-1, n}), weight ? &w : nullptr, bias ? &b : nullptr, eps, rms)
      .y.reshape(x.shape().dims());
}
}  // namespace internal

// (x - mean) / sqrt(var + eps) * weight + bias over the last dims (`normalized`, which weight
// and bias have when given), the variance biased (as PyTorch's layer_norm).
template <Backend B>
Tensor<B> layer_norm(const Tensor<B>& x, const Dims& normalized, const Tensor<B>* weight = nullptr,
                     const Tensor<B>* bias = nullptr, double eps = 1e-5) {
  internal::NormDims(x.shape(), normalized, "layer_norm");
  internal::CheckAffine("layer_norm weight", weight, normalized);
  internal::CheckAffine("layer_norm bias", bias, normalized);
  return internal::NormOverRows(x, normalized, weight, bias, eps, /*rms=*/false);
}

// x / sqrt(mean(x^2) + eps) * weight over the last dims (Zhang & Sennrich's RMSNorm).
template <Backend B>
Tensor<B> rms_norm(const Tensor<B>& x, const Dims& normalized, const Tensor<B>* weight = nullptr, double eps = 1e-6) {
  internal::NormDims(x.shape(), normalized, "rms_norm");
  internal::CheckAffine("rms_norm weight", weight, normalized);
  return internal::NormOverRows<B>(x, normalized, weight, nullptr, eps, /*rms=*/true);
}

enum class GeluApproximation { kNone, kTanh };

// GELU: exact, 0.5 x (1 + erf(x / sqrt 2)), or in the tanh form (GPT-2's; PyTorch's
// approximate="tanh").
template <Backend B>
Tensor<B> gelu(const Tensor<B>& x, GeluApproximation approximate = GeluApproximation::kNone) {
  return fused::gelu(x, approximate == GeluApproximation::kTanh);
}

// Zeroes each element with probability p and scales the rest by 1 / (1 - p) when training;
// the mask comes from `gen` (drawn in f32 on the host, so every backend draws the same).
template <Backend B>
Tensor<B> dropout(const Tensor<B>& x, double p, bool training, Generator& gen) {
  if (!(p >= 0 && p < 1)) ThrowInvalidArgument("dropout: p = %g must be in [0, 1)", p);
  if (!training || p == 0) return x;
  const auto keep = Tensor<B>::uniform(x.shape(), 0, 1, gen, DType::kF32, x.device()).ge(p);
  return Tensor<B>::where(keep, x / (1 - p), x.scalar_like(0));
}

// What scaled_dot_product_attention is asked to do besides softmax(q k^T / sqrt(d)) v.
template <Backend B>
struct AttentionOptions {
  bool causal = false;              // position i sees positions <= i
  const Tensor<B>* mask = nullptr;  // bool (true: attend) or additive, broadcast to [b, h, s, s]
  double dropout = 0;               // on the attention weights, when training
  bool training = false;
  Generator* gen = nullptr;     // needed for dropout
  std::optional<double> scale;  // default 1 / sqrt(head_dim)
};

// q, k, v [batch, heads, seq, head_dim] (k and v may have their own seq length).
template <Backend B>
Tensor<B> scaled_dot_product_attention(const Tensor<B>& q, const Tensor<B>& k, const Tensor<B>& v,
                                       const AttentionOptions<B>& o = {}) {
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4 || k.shape() != v.shape() || q.size(0) != k.size(0) ||
      q.size(1) != k.size(1) || q.size(3) != k.size(3)) {
    ThrowInvalidArgument("scaled_dot_product_attention: q %s, k %s, v %s are not [batch, heads, seq, head_dim] alike",
                         q.Describe(), k.Describe(), v.Describe());
  }
  const int64_t sq = q.size(2), sk = k.size(2);
  const double scale = o.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(3))));
  Tensor<B> scores = q.matmul(k.transpose(2, 3)) * scale;  // [b, h, sq, sk]
  if (o.mask != nullptr) {
    const Shape want({scores.size(0), scores.size(1), sq, sk});
    const Shape& m = o.mask->shape();
    bool broadcasts = m.rank() <= 4;
    for (int64_t i = 0; broadcasts && i < m.rank(); ++i) {
      const int64_t d = m[m.rank() - 1 - i];
      broadcasts = d == 1 || d == want[3 - i];
    }
    if (!broadcasts) {
      ThrowInvalidArgument("scaled_dot_product_attention: mask %s does not broadcast to the scores %s",
                           o.mask->Describe(), want.ToString());
    }
    scores = o.mask->dtype() == DType::kBool ? Tensor<B>::where(*o.mask, scores, scores.scalar_like(-INFINITY))
                                             : scores + *o.mask;
  }
  // Causal: position i of the query sees key positions <= i + (sk - sq) (the query ends the keys).
  Tensor<B> weights = fused::softmax_last(scores, /*log=*/false, o.causal);
  if (o.dropout > 0 && o.training) {
    if (o.gen == nullptr) ThrowInvalidArgument("scaled_dot_product_attention: dropout needs a generator");
    weights = dropout(weights, o.dropout, true, *o.gen);
  }
  return weights.matmul(v);
}

enum class Reduction { kMean, kSum };

struct CrossEntropyOptions {
  Reduction reduction = Reduction::kMean;
  int64_t ignore_index = -100;  // targets equal to it count for nothing (nor in the mean)
  double label_smoothing = 0;   // in [0, 1]: the target mixes one-hot with uniform
};

// Cross-entropy from logits [N, C] and class ids [N] (in [0, C) or ignore_index), as PyTorch's
// cross_entropy: -((1 - s) log p[y] + s mean_c log p[c]) per row, then the mean over the rows
// that are not ignored (or the sum).
template <Backend B>
Tensor<B> cross_entropy(const Tensor<B>& logits, const Tensor<B>& targets, const CrossEntropyOptions& o = {}) {
  if (logits.rank() != 2 || targets.rank() != 1 || targets.size(0) != logits.size(0) || IsFloating(targets.dtype())) {
    ThrowInvalidArgument("cross_entropy: needs logits [N, C] and integer targets [N], got %s and %s", logits.Describe(),
                         targets.Describe());
  }
  if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1)) {
    ThrowInvalidArgument("cross_entropy: label_smoothing %g must be in [0, 1]", o.label_smoothing);
  }
  // Half logits are widened: the loss and its gradient's first step in f32.
  const Tensor<B> wide = IsHalf(logits.dtype()) ? logits.to(DType::kF32) : logits;
  const Tensor<B> loss = fused::cross_entropy_rows(wide, targets, o.ignore_index, o.label_smoothing).loss;
  if (o.reduction == Reduction::kSum) return loss.sum();
  return loss.sum() / targets.ne(o.ignore_index).to(wide.dtype()).sum();
}

}  // namespace kiln::nn::functional

#endif  // KILN_NN_FUNCTIONAL_H_
