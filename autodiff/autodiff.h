// Autodiff<B>: a backend that wraps any backend B and records the graph. Each op computes its
// value with B's op and records a backward step written with B's ops, so gradients run on the
// same device with the same kernels; nothing here knows about any particular backend.
//
//   using AD = Autodiff<Cpu>;
//   Tensor<AD> w = Tensor<AD>::uniform({3, 2}, -1, 1, gen).require_grad();
//   Gradients<Cpu> grads = (x.matmul(w)).relu().sum().backward();
//   Tensor<Cpu> dw = *grads.get(w);
#ifndef KILN_AUTODIFF_AUTODIFF_H_
#define KILN_AUTODIFF_AUTODIFF_H_

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "autodiff/backward.h"
#include "autodiff/grad_mode.h"
#include "autodiff/gradients.h"
#include "autodiff/node.h"
#include "tensor/backend.h"
#include "tensor/memory_usage.h"
#include "tensor/shape_rules.h"
#include "tensor/tensor.h"

namespace kiln {

template <Backend B>
struct Autodiff;

// Autodiff<B> has the fused groups B has (tensor/fused_ops.h).
template <Backend B>
struct WrappedFusedGroups<Autodiff<B>> {
  static constexpr bool softmax = FusedSoftmax<B>, norm = FusedNorm<B>, gelu = FusedGelu<B>,
                        cross_entropy = FusedCrossEntropy<B>, attention = FusedAttention<B>, linear = FusedLinear<B>,
                        sgd = FusedSgd<B>, adamw = FusedAdamW<B>;
};

template <Backend B>
struct Autodiff {
  using Inner = B;
  using Device = typename B::Device;
  using P = typename B::Primitive;
  using NodeT = autodiff::Node<P>;
  using Grads = typename NodeT::Grads;
  using Gradients = kiln::Gradients<B>;

  // B's tensor plus the node that made it (null when no gradient flows to it).
  struct Primitive {
    P value;
    std::shared_ptr<NodeT> node;
  };

  static const char* Name() {
    static const std::string name = std::string("autodiff_") + B::Name();
    return name.c_str();
  }

  static const Shape& shape(const Primitive& p) { return B::shape(p.value); }
  static DType dtype(const Primitive& p) { return B::dtype(p.value); }
  static Device device(const Primitive& p) { return B::device(p.value); }
  // B's counts: the graph's saved tensors are B's tensors on the same device.
  static MemoryUsage memory_usage(const Device& d) { return B::memory_usage(d); }
  static void reset_peak_memory(const Device& d) { B::reset_peak_memory(d); }

  // ---- Autodiff's own operations (reached through Tensor<Autodiff<B>>) ---------------------
  static Primitive require_grad(const Primitive& p) {
    if (!IsFloating(dtype(p))) {
      ThrowInvalidArgument("require_grad: only floating tensors have gradients, got %s%s", DTypeName(dtype(p)),
                           shape(p).ToString());
    }
    auto leaf = std::make_shared<NodeT>();
    leaf->leaf = true;
    return {p.value, std::move(leaf)};
  }
  static bool requires_grad(const Primitive& p) { return p.node != nullptr; }
  static bool is_leaf(const Primitive& p) { return p.node != nullptr && p.node->leaf; }
  static Primitive detach(const Primitive& p) { return {p.value, nullptr}; }
  static const P& inner(const Primitive& p) { return p.value; }
  static Primitive from_inner(P value) { return {std::move(value), nullptr}; }
  // The same leaf (identity, gradients, hooks) holding a new value: how optimizers update
  // parameters without breaking what is registered on them.
  static Primitive with_value(const Primitive& leaf, P value) {
    if (!is_leaf(leaf)) ThrowInvalidArgument("with_value: the tensor is not a leaf (use require_grad)");
    if (B::shape(value) != shape(leaf) || B::dtype(value) != dtype(leaf)) {
      ThrowInvalidArgument("with_value: new value %s%s differs from the leaf's %s%s", DTypeName(B::dtype(value)),
                           B::shape(value).ToString(), DTypeName(dtype(leaf)), shape(leaf).ToString());
    }
    return {std::move(value), leaf.node};
  }
  // Called with the gradient of this leaf the moment it is final during backward.
  // `takes`: the hook takes the gradient, so backward's result leaves it out.
  static void register_hook(const Primitive& leaf, typename NodeT::Hook hook, bool takes = false) {
    if (!is_leaf(leaf)) ThrowInvalidArgument("register_hook: the tensor is not a leaf (use require_grad)");
    leaf.node->hooks.push_back(std::move(hook));
    leaf.node->hooks_take_gradient = leaf.node->hooks_take_gradient || takes;
  }
  static Gradients backward(const Primitive& root) {
    if (shape(root).numel() != 1) {
      ThrowInvalidArgument(
          "backward: needs a single-element tensor, got %s%s; pass a seed "
          "gradient of the same shape instead",
          DTypeName(dtype(root)), shape(root).ToString());
    }
    return backward(root, B::full(shape(root), 1, dtype(root), device(root)));
  }
  static Gradients backward(const Primitive& root, const P& seed) {
    if (B::shape(seed) != shape(root) || B::dtype(seed) != dtype(root) || !(B::device(seed) == device(root))) {
      ThrowInvalidArgument("backward: seed %s%s on %s must match the tensor %s%s on %s", DTypeName(B::dtype(seed)),
                           B::shape(seed).ToString(), B::device(seed).ToString(), DTypeName(dtype(root)),
                           shape(root).ToString(), device(root).ToString());
    }
    if (root.node == nullptr) return Gradients();  // nothing requires a gradient
    return autodiff::RunBackward<B>(root.node, seed);
  }

  // ---- The ops of tensor/op_table.h, each recording its derivative (checked: RecordsEveryOp) --
  static Primitive from_data(const TensorData& d, const Device& dev) { return {B::from_data(d, dev), nullptr}; }
  static TensorData to_data(const Primitive& p) { return B::to_data(p.value); }
  static Primitive full(const Shape& s, Scalar v, DType t, const Device& dev) {
    return {B::full(s, v, t, dev), nullptr};
  }
  static Primitive to_device(const Primitive& p, const Device& dev) {
    const Device from = device(p);
    return Record(B::to_device(p.value, dev), {p},
                  [from](const P& g, uint32_t) { return Grads{B::to_device(g, from)}; });
  }
  static Primitive cast(const Primitive& p, DType t) {
    P out = B::cast(p.value, t);
    if (!IsFloating(t)) return {std::move(out), nullptr};
    const DType from = dtype(p);
    return Record(std::move(out), {p}, [from](const P& g, uint32_t) { return Grads{B::cast(g, from)}; });
  }

  static Primitive unary(UnaryOp op, const Primitive& x);
  static Primitive binary(BinaryOp op, const Primitive& a, const Primitive& b);
  static Primitive where(const Primitive& cond, const Primitive& a, const Primitive& b);
  static Primitive reduce(ReduceOp op, const Primitive& x, absl::Span<const int64_t> dims, bool keepdim);
  static Primitive argmax(const Primitive& x, int64_t dim, bool keepdim) {
    return {B::argmax(x.value, dim, keepdim), nullptr};
  }
  static Primitive matmul(const Primitive& a, const Primitive& b);
  static Primitive reshape(const Primitive& x, const Shape& s) {
    const Shape from = shape(x);
    return Record(B::reshape(x.value, s), {x}, [from](const P& g, uint32_t) { return Grads{B::reshape(g, from)}; });
  }
  static Primitive permute(const Primitive& x, absl::Span<const int64_t> dims) {
    Dims inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) inverse[dims[i]] = static_cast<int64_t>(i);
    Primitive out = Record(B::permute(x.value, dims), {x},
                           [inverse](const P& g, uint32_t) { return Grads{B::permute(g, inverse)}; });
    if (out.node != nullptr) out.node->swaps_last_two = inverse == SwapLast(static_cast<int64_t>(dims.size()));
    return out;
  }
  static Primitive expand(const Primitive& x, const Shape& s) {
    const Shape from = shape(x);
    return Record(B::expand(x.value, s), {x}, [from](const P& g, uint32_t) { return Grads{Unbroadcast(g, from)}; });
  }
  static Primitive slice(const Primitive& x, int64_t dim, int64_t start, int64_t end, int64_t step);
  static Primitive cat(absl::Span<const Primitive> parts, int64_t dim);
  static Primitive gather(const Primitive& x, int64_t dim, const Primitive& index) {
    const Shape from = shape(x);
    const P idx = index.value;
    return Record(B::gather(x.value, dim, idx), {x},
                  [from, dim, idx](const P& g, uint32_t) { return Grads{B::scatter_add(g, dim, idx, from)}; });
  }
  static Primitive index_select(const Primitive& x, int64_t dim, const Primitive& index) {
    const Shape from = shape(x);
    const P idx = index.value;
    return Record(B::index_select(x.value, dim, idx), {x}, [from, dim, idx](const P& g, uint32_t) {
      return Grads{B::scatter_add(g, dim, AlongDim(idx, dim, B::shape(g)), from)};
    });
  }
  static Primitive scatter_add(const Primitive& src, int64_t dim, const Primitive& index, const Shape& s) {
    const P idx = index.value;
    return Record(B::scatter_add(src.value, dim, idx, s), {src},
                  [dim, idx](const P& g, uint32_t) { return Grads{B::gather(g, dim, idx)}; });
  }

  // ---- Fused kernels (tensor/fused_ops.h), where B has them: B's forward, recorded with B's
  // fused backward (autodiff_fused.h). Their *_backward forms compute without recording.
  static Primitive softmax_last(const Primitive& x, bool log, bool causal) requires FusedSoftmax<B>;
  static Primitive softmax_last_backward(const Primitive& y, const Primitive& gy, bool log,
                                         bool causal) requires FusedSoftmax<B> {
    return {B::softmax_last_backward(y.value, gy.value, log, causal), nullptr};
  }
  static NormForward<Primitive> norm_last(const Primitive& x, const Primitive* weight, const Primitive* bias,
                                          double eps, bool rms) requires FusedNorm<B>;
  static NormBackward<Primitive> norm_last_backward(const Primitive& gy, const Primitive& x, const Primitive* weight,
                                                    const Primitive& mean, const Primitive& rstd, bool rms,
                                                    bool bias_grad) requires FusedNorm<B> {
    const auto g = B::norm_last_backward(gy.value, x.value, weight ? &weight->value : nullptr, mean.value, rstd.value,
                                         rms, bias_grad);
    return {{g.x_grad, nullptr}, {g.weight_grad, nullptr}, {g.bias_grad, nullptr}};
  }
  static Primitive gelu(const Primitive& x, bool tanh) requires FusedGelu<B> {
    const P xv = x.value;
    return Record(B::gelu(xv, tanh), {x},
                  [xv, tanh](const P& g, uint32_t) { return Grads{B::gelu_backward(xv, g, tanh)}; });
  }
  static Primitive gelu_backward(const Primitive& x, const Primitive& gy, bool tanh) requires FusedGelu<B> {
    return {B::gelu_backward(x.value, gy.value, tanh), nullptr};
  }
  static AttentionForward<Primitive> causal_attention(const Primitive& qkv, int64_t heads) requires FusedAttention<B>;
  static Primitive causal_attention_backward(const Primitive& qkv, const Primitive& weights, const Primitive& gy,
                                             int64_t heads) requires FusedAttention<B> {
    return {B::causal_attention_backward(qkv.value, weights.value, gy.value, heads), nullptr};
  }
  static Primitive linear(const Primitive& x, const Primitive& weight, const Primitive* bias) requires FusedLinear<B>;
  static CrossEntropyForward<Primitive> cross_entropy_rows(const Primitive& logits, const Primitive& targets,
                                                           int64_t ignore_index,
                                                           double smoothing) requires FusedCrossEntropy<B>;
  static Primitive cross_entropy_rows_backward(const Primitive& logits, const Primitive& targets, const Primitive& lse,
                                               const Primitive& g, int64_t ignore_index,
                                               double smoothing) requires FusedCrossEntropy<B> {
    return {B::cross_entropy_rows_backward(logits.value, targets.value, lse.value, g.value, ignore_index, smoothing),
            nullptr};
  }

  // ---- Recording ops defined elsewhere (e.g. differentiable collectives) -------------------
  // Wraps `value` in a node whose inputs are `inputs`' nodes, when gradients are recorded and
  // at least one input has a node; otherwise returns it untracked. `backward` gets the output's
  // gradient and gives one (or nothing) per input; it may throw kiln::Error.
  static Primitive Record(P value, std::initializer_list<Primitive> inputs, typename NodeT::Backward backward) {
    return Record(std::move(value), absl::MakeConstSpan(inputs.begin(), inputs.size()), std::move(backward));
  }
  static Primitive Record(P value, absl::Span<const Primitive> inputs, typename NodeT::Backward backward) {
    bool tracked = false;
    for (const auto& in : inputs) tracked = tracked || in.node != nullptr;
    if (!tracked || !GradEnabled()) return {std::move(value), nullptr};
    auto node = std::make_shared<NodeT>();
    for (const auto& in : inputs) node->inputs.push_back(in.node);
    node->backward = std::move(backward);
    return {std::move(value), std::move(node)};
  }
  static bool Needs(uint32_t needs, int i) { return i >= 32 || ((needs >> i) & 1u); }

 private:
  // ---- Helpers (all written with B's ops) -----------------------------------------------------

  static P Const(Scalar v, const P& like) { return B::full(Shape{}, v, B::dtype(like), B::device(like)); }
  static P Mul(const P& a, const P& b) { return B::binary(BinaryOp::kMul, a, b); }
  static P Div(const P& a, const P& b) { return B::binary(BinaryOp::kDiv, a, b); }
  static P Sub(const P& a, const P& b) { return B::binary(BinaryOp::kSub, a, b); }
  static P Neg(const P& a) { return B::unary(UnaryOp::kNeg, a); }
  static P Zero(const P& like) { return Const(0, like); }

  // Sums a broadcast gradient back to the shape of the operand it came from.
  static P Unbroadcast(const P& g, const Shape& to) {
    const Shape& from = B::shape(g);
    if (from == to) return g;
    Dims dims;
    const int64_t lead = from.rank() - to.rank();
    for (int64_t d = 0; d < from.rank(); ++d) {
      if (d < lead || (to[d - lead] == 1 && from[d] != 1)) dims.push_back(d);
    }
    return B::reshape(dims.empty() ? g : B::reduce(ReduceOp::kSum, g, dims, true), to);
  }
  // A 1-D index along `dim`, broadcast to `shape` (for scatter_add).
  static P AlongDim(const P& index, int64_t dim, const Shape& shape) {
    Dims view(shape.rank(), 1);
    view[dim] = B::shape(index)[0];
    return B::expand(B::reshape(index, Shape(view)), shape);
  }
  static Dims SwapLast(int64_t rank) {
    Dims perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    if (rank >= 2) std::swap(perm[rank - 1], perm[rank - 2]);
    return perm;
  }
};

// Autodiff<B> writes each op by hand, since each records its own derivative, and is checked
// against the op table (tensor/op_table.h): every core op, and each fused kernel group that B has,
// with the row's exact signature. A missing or mis-typed op fails one of these static_asserts with
// a note that names it ("required for the satisfaction of 'gelu<B>'"). Optimizer updates are not
// recorded: they run on the inner values. Called by tests/autodiff/autodiff_test.cc (Cpu) and
// tests/backends/dispatch/dispatch_test.cc (Dispatch).
template <Backend B>
constexpr bool RecordsEveryOp() {
  static_assert(Backend<Autodiff<B>>);
  if constexpr (FusedSoftmax<B>) static_assert(FusedSoftmax<Autodiff<B>>);
  if constexpr (FusedNorm<B>) static_assert(FusedNorm<Autodiff<B>>);
  if constexpr (FusedGelu<B>) static_assert(FusedGelu<Autodiff<B>>);
  if constexpr (FusedCrossEntropy<B>) static_assert(FusedCrossEntropy<Autodiff<B>>);
  if constexpr (FusedAttention<B>) static_assert(FusedAttention<Autodiff<B>>);
  if constexpr (FusedLinear<B>) static_assert(FusedLinear<Autodiff<B>>);
  return true;
}

}  // namespace kiln

#include "autodiff/autodiff_fused.h"  // IWYU pragma: export
#include "autodiff/autodiff_ops.h"    // IWYU pragma: export

#endif  // KILN_AUTODIFF_AUTODIFF_H_
