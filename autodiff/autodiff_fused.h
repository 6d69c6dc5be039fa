// The recorded forms of the fused kernels: forward with B's kernel, backward with B's fused
// backward, saving what that needs (the output for softmax; x and the row statistics for norms;
// the logits and log-sum-exp for cross-entropy). Included by autodiff.h only.
#ifndef KILN_AUTODIFF_AUTODIFF_FUSED_H_
#define KILN_AUTODIFF_AUTODIFF_FUSED_H_

#include <optional>
#include <vector>

namespace kiln {

template <Backend B>
typename Autodiff<B>::Primitive Autodiff<B>::softmax_last(const Primitive& x, bool log,
                                                          bool causal) requires FusedSoftmax<B> {
  P y = B::softmax_last(x.value, log, causal);
  const P yv = y;
  return Record(std::move(y), {x}, [yv, log, causal](const P& g, uint32_t) {
    return Grads{B::softmax_last_backward(yv, g, log, causal)};
  });
}

template <Backend B>
NormForward<typename Autodiff<B>::Primitive> Autodiff<B>::norm_last(const Primitive& x, const Primitive* weight,
                                                                    const Primitive* bias, double eps,
                                                                    bool rms) requires FusedNorm<B> {
  NormForward<P> f = B::norm_last(x.value, weight ? &weight->value : nullptr, bias ? &bias->value : nullptr, eps, rms);
  std::vector<Primitive> inputs = {x};
  if (weight != nullptr) inputs.push_back(*weight);
  if (bias != nullptr) inputs.push_back(*bias);
  const P xv = x.value, mean = f.mean, rstd = f.rstd;
  const std::optional<P> wv = weight ? std::optional<P>(weight->value) : std::nullopt;
  const bool has_bias = bias != nullptr;
  const int bias_input = weight != nullptr ? 2 : 1;
  Primitive y = Record(f.y, inputs, [=](const P& g, uint32_t needs) {
    const bool bias_grad = has_bias && Needs(needs, bias_input);
    NormBackward<P> d = B::norm_last_backward(g, xv, wv ? &*wv : nullptr, mean, rstd, rms, bias_grad);
    Grads grads = {std::move(d.x_grad)};
    if (wv) grads.push_back(std::move(d.weight_grad));
    if (has_bias) grads.push_back(bias_grad ? std::optional<P>(std::move(d.bias_grad)) : std::nullopt);
    return grads;
  });
  return {std::move(y), {f.mean, nullptr}, {f.rstd, nullptr}};
}

template <Backend B>
CrossEntropyForward<typename Autodiff<B>::Primitive> Autodiff<B>::cross_entropy_rows(
    const Primitive& logits, const Primitive& targets, int64_t ignore_index,
    double smoothing) requires FusedCrossEntropy<B> {
  CrossEntropyForward<P> f = B::cross_entropy_rows(logits.value, targets.value, ignore_index, smoothing);
  const P lv = logits.value, tv = targets.value, lse = f.lse;
  Primitive loss = Record(f.loss, {logits}, [=](const P& g, uint32_t) {
    return Grads{B::cross_entropy_rows_backward(lv, tv, lse, g, ignore_index, smoothing)};
  });
  return {std::move(loss), {f.lse, nullptr}};
}

template <Backend B>
AttentionForward<typename Autodiff<B>::Primitive> Autodiff<B>::causal_attention(
    const Primitive& qkv, int64_t heads) requires FusedAttention<B> {
  AttentionForward<P> f = B::causal_attention(qkv.value, heads);
  const P qv = qkv.value, weights = f.weights;
  Primitive y = Record(std::move(f.y), {qkv}, [=](const P& g, uint32_t) {
    return Grads{B::causal_attention_backward(qv, weights, g, heads)};
  });
  return {std::move(y), {f.weights, nullptr}};
}

// The gradients over the rows of x folded into one dim, so each is one product (or sum).
template <Backend B>
typename Autodiff<B>::Primitive Autodiff<B>::linear(const Primitive& x, const Primitive& weight,
                                                    const Primitive* bias) requires FusedLinear<B> {
  const P xv = x.value, wv = weight.value;
  std::vector<Primitive> inputs = {x, weight};
  if (bias != nullptr) inputs.push_back(*bias);
  const bool has_bias = bias != nullptr;
  return Record(B::linear(xv, wv, bias ? &bias->value : nullptr), inputs, [=](const P& g, uint32_t needs) {
    const Shape& in_shape = B::shape(xv);
    const int64_t in = B::shape(wv)[1], out = B::shape(wv)[0];
    const int64_t rows = Shape(Dims(in_shape.dims().begin(), in_shape.dims().end() - 1)).numel();
    const P g2 = B::reshape(g, Shape{rows, out});
    Grads grads(has_bias ? 3 : 2);
    if (Needs(needs, 0)) grads[0] = B::reshape(B::matmul(g2, wv), in_shape);
    if (Needs(needs, 1)) grads[1] = B::matmul(B::permute(g2, {1, 0}), B::reshape(xv, Shape{rows, in}));
    if (has_bias && Needs(needs, 2)) grads[2] = B::reduce(ReduceOp::kSum, g2, {0}, false);
    return grads;
  });
}

}  // namespace kiln

#endif  // KILN_AUTODIFF_AUTODIFF_FUSED_H_
