// The operations of a backend, each declared once. A row reads
//
//   X(Result, name, (parameters), (arguments))
//
// and is expanded with `Primitive` and `Device` meaning the backend's own types (a backend struct
// declares both). From these rows come
//   - the Backend concept's requirements (tensor/backend.h) and the Fused* concepts
//     (tensor/fused_ops.h): B::name must have exactly the row's signature;
//   - each backend's declarations (KILN_DECLARE_BACKEND_OPS() and friends, below);
//   - Dispatch's forwarding to the backend that holds a tensor (backends/dispatch/);
// and Autodiff<B>, which writes each op by hand to record its derivative, is checked against
// them. Adding an op: docs/adding_an_op.md.
//
// Tensor<B> validates every argument (shapes, dtypes, devices, dims) before it calls an op, so a
// backend may assume the preconditions written beside each row. Only index *values* (gather,
// index_select) are the backend's to check, since they live on its device.
#ifndef KILN_TENSOR_OP_TABLE_H_
#define KILN_TENSOR_OP_TABLE_H_

// clang-format off

// ---- Core ops: every backend has them (the Backend concept) ------------------------------------

// Ops that run on one device. The backend that runs one is the one of its first tensor (or
// device) argument: Tensor<B> has checked that the others are on the same device.
#define KILN_LOCAL_OPS(X)                                                                         \
  /* Creation and transfer. Throws kiln::Error for a device that does not exist. */              \
  X(Primitive, from_data, (const TensorData& data, const Device& device), (data, device))         \
  X(TensorData, to_data, (const Primitive& p), (p))                                               \
  X(Primitive, full, (const Shape& shape, Scalar value, DType dtype, const Device& device),       \
    (shape, value, dtype, device))                                                                \
  /* Float -> int saturates and maps NaN to 0; anything -> bool is `!= 0`. */                     \
  X(Primitive, cast, (const Primitive& p, DType dtype), (p, dtype))                               \
  /* Element-wise. unary: float ops only get float inputs. binary: equal dtypes (not bool for     \
     arithmetic), shapes broadcastable; comparisons give bool; integer arithmetic wraps, integer  \
     division truncates and throws InvalidArgument on a zero divisor. */                          \
  X(Primitive, unary, (UnaryOp op, const Primitive& p), (op, p))                                  \
  X(Primitive, binary, (BinaryOp op, const Primitive& a, const Primitive& b), (op, a, b))         \
  /* where(cond, a, b): cond is bool; a and b share a dtype; all three broadcast. */              \
  X(Primitive, where, (const Primitive& cond, const Primitive& a, const Primitive& b),            \
    (cond, a, b))                                                                                 \
  /* Reductions over `dims` (sorted, unique, in range, non-empty). Mean of integers truncates;    \
     max/min of an empty extent is not called. */                                                 \
  X(Primitive, reduce, (ReduceOp op, const Primitive& p, absl::Span<const int64_t> dims,          \
                        bool keepdim), (op, p, dims, keepdim))                                    \
  /* Index (i64) of the first maximum along dim (normalised, non-empty extent). */                \
  X(Primitive, argmax, (const Primitive& p, int64_t dim, bool keepdim), (p, dim, keepdim))        \
  /* [..., m, k] x [..., k, n] (rank >= 2, batch dims broadcast), same float dtype. */            \
  X(Primitive, matmul, (const Primitive& a, const Primitive& b), (a, b))                          \
  /* Layout. reshape: same element count; the result is dense (row-major), so a reshape to its    \
     own shape materialises a view. permute: a permutation of 0..rank-1. expand: shape is a       \
     broadcast of p's shape. slice(dim, start, end, step): 0 <= start <= end <= size, step >= 1.  \
     cat: non-empty, shapes equal except along dim. */                                            \
  X(Primitive, reshape, (const Primitive& p, const Shape& shape), (p, shape))                     \
  X(Primitive, permute, (const Primitive& p, absl::Span<const int64_t> dims), (p, dims))          \
  X(Primitive, expand, (const Primitive& p, const Shape& shape), (p, shape))                      \
  X(Primitive, slice, (const Primitive& p, int64_t dim, int64_t start, int64_t end,               \
                       int64_t step), (p, dim, start, end, step))                                 \
  X(Primitive, cat, (absl::Span<const Primitive> parts, int64_t dim), (parts, dim))               \
  /* gather(p, dim, index): index is i64 of p's rank, index.shape[d] <= p.shape[d] for d != dim.  \
     index_select(p, dim, index): index is 1-D i64. Both throw OutOfRange for an index value      \
     outside [0, p.shape[dim]). */                                                                \
  X(Primitive, gather, (const Primitive& p, int64_t dim, const Primitive& index), (p, dim, index))\
  X(Primitive, index_select, (const Primitive& p, int64_t dim, const Primitive& index),           \
    (p, dim, index))                                                                              \
  /* scatter_add(src, dim, index, shape): zeros of `shape` (src's dtype) plus src[pos] added at   \
     `pos` with its `dim` coordinate replaced by index[pos]. index is i64 of src's shape, no      \
     larger than `shape` in dims other than dim; values checked (OutOfRange). The backward of     \
     gather, index_select and strided slices. */                                                  \
  X(Primitive, scatter_add, (const Primitive& src, int64_t dim, const Primitive& index,           \
                             const Shape& shape), (src, dim, index, shape))

// The op that crosses devices (within one backend; Dispatch also moves between backends, through
// host memory, and so writes its own). Throws kiln::Error for a device that does not exist.
#define KILN_CROSS_DEVICE_OPS(X)                                                                  \
  X(Primitive, to_device, (const Primitive& p, const Device& device), (p, device))

#define KILN_CORE_OPS(X) KILN_LOCAL_OPS(X) KILN_CROSS_DEVICE_OPS(X)

// ---- Fused ops: optional, in groups (tensor/fused_ops.h) -------------------------------------
// A backend has a group or not; one without it gets the composition of its plain ops
// (tensor/fused.h), never an error. The rows of a group read
//
//   X(Group, Result, name, (parameters), (arguments), Composition)
//
// Group: the concept that says a backend has the group; Composition: the function in
// kiln::fused::composed that computes the op from plain ops (Dispatch's fallback).
// Preconditions (checked by tensor/fused.h before any call): float operands of one dtype on one
// device; results are dense (row-major) in the operands' dtype. "Rows" are the last dim.

// softmax_last(x, log, causal): softmax (log: log-softmax) over the last dim. causal: rank >= 2;
// with [.., sq, sk] the last two dims, row i keeps columns j <= i + (sk - sq) and the others are
// masked (softmax 0, log-softmax -inf); a row with every column masked is NaN.
// softmax_last_backward(y, gy, log, causal): y the forward's output, gy its gradient:
// softmax gx = y * (gy - sum(gy * y)); log-softmax gx = gy - exp(y) * sum(gy), the sums over the
// kept columns (a masked output is a constant); masked gx = 0.
#define KILN_FUSED_SOFTMAX_OPS(X)                                                                 \
  X(FusedSoftmax, Primitive, softmax_last, (const Primitive& x, bool log, bool causal),           \
    (x, log, causal), Softmax)                                                                    \
  X(FusedSoftmax, Primitive, softmax_last_backward, (const Primitive& y, const Primitive& gy,     \
                                                     bool log, bool causal),                      \
    (y, gy, log, causal), SoftmaxBackward)

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
#define KILN_FUSED_NORM_OPS(X)                                                                    \
  X(FusedNorm, NormForward<Primitive>, norm_last, (const Primitive& x, const Primitive* weight,   \
                                                   const Primitive* bias, double eps, bool rms),  \
    (x, weight, bias, eps, rms), Norm)                                                            \
  X(FusedNorm, NormBackward<Primitive>, norm_last_backward,                                       \
    (const Primitive& gy, const Primitive& x, const Primitive* weight, const Primitive& mean,     \
     const Primitive& rstd, bool rms, bool bias_grad),                                            \
    (gy, x, weight, mean, rstd, rms, bias_grad), NormGrad)

// gelu(x, tanh): exact 0.5 x (1 + erf(x / sqrt 2)), or the tanh form
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))); gelu_backward(x, gy, tanh) = gy * gelu'(x).
#define KILN_FUSED_GELU_OPS(X)                                                                    \
  X(FusedGelu, Primitive, gelu, (const Primitive& x, bool tanh), (x, tanh), Gelu)                 \
  X(FusedGelu, Primitive, gelu_backward, (const Primitive& x, const Primitive& gy, bool tanh),    \
    (x, gy, tanh), GeluBackward)

// cross_entropy_rows(logits [N, C], targets [N] i64, ignore_index, smoothing): per row
// loss = lse - (1 - s) x[y] - (s / C) sum_c x[c] with lse = log sum_c exp(x[c]); 0 for a row whose
// target is ignore_index. A target outside [0, C) that is not ignore_index throws OutOfRange
// naming it. loss and lse are [N].
// cross_entropy_rows_backward(logits, targets, lse, g [N], ignore_index, smoothing):
// g_logits = g[i] * (exp(x - lse) - (1 - s) onehot(y) - s / C), 0 on ignored rows.
#define KILN_FUSED_CROSS_ENTROPY_OPS(X)                                                           \
  X(FusedCrossEntropy, CrossEntropyForward<Primitive>, cross_entropy_rows,                        \
    (const Primitive& logits, const Primitive& targets, int64_t ignore_index, double smoothing),  \
    (logits, targets, ignore_index, smoothing), CrossEntropyRows)                                 \
  X(FusedCrossEntropy, Primitive, cross_entropy_rows_backward,                                    \
    (const Primitive& logits, const Primitive& targets, const Primitive& lse, const Primitive& g, \
     int64_t ignore_index, double smoothing),                                                     \
    (logits, targets, lse, g, ignore_index, smoothing), CrossEntropyRowsBackward)

// causal_attention(qkv [b, s, 3 d], heads): GPT's causal self-attention over its packed
// projections. q, k and v are the three thirds of the last dim, each cut into `heads` heads of
// hd = d / heads columns; per head, weights = softmax(q k^T / sqrt(hd)) with key j > query i masked
// (weight 0), and y = weights v. y is [b, s, d] with the heads side by side (column h hd + c is
// head h's c); weights [b, heads, s, s] are kept for the backward.
// causal_attention_backward(qkv, weights, gy [b, s, d], heads): the gradient of qkv, [b, s, 3 d].
#define KILN_FUSED_ATTENTION_OPS(X)                                                               \
  X(FusedAttention, AttentionForward<Primitive>, causal_attention,                                \
    (const Primitive& qkv, int64_t heads), (qkv, heads), CausalAttention)                         \
  X(FusedAttention, Primitive, causal_attention_backward,                                         \
    (const Primitive& qkv, const Primitive& weights, const Primitive& gy, int64_t heads),         \
    (qkv, weights, gy, heads), CausalAttentionBackward)

// linear(x [..., in], weight [out, in], bias [out] or null): x weight^T + bias, [..., out]
// (nn::Linear's product with its bias added as the product is formed, not in a pass of its own).
// The gradients are plain products and a sum (Autodiff<B>::linear).
#define KILN_FUSED_LINEAR_OPS(X)                                                                  \
  X(FusedLinear, Primitive, linear, (const Primitive& x, const Primitive& weight,                 \
                                     const Primitive* bias), (x, weight, bias), Linear)

// Optimizer updates in one pass per parameter (PyTorch's rules); all operands of p's shape.
// sgd_update(p, g, velocity (null on the first step), lr, momentum, weight_decay, nesterov):
//   d = g + weight_decay p; v = momentum v + d (v = d on the first step);
//   p' = p - lr (nesterov ? d + momentum v : v); with momentum 0, p' = p - lr d and velocity is
//   default-constructed.
#define KILN_FUSED_SGD_OPS(X)                                                                     \
  X(FusedSgd, SgdStep<Primitive>, sgd_update,                                                     \
    (const Primitive& p, const Primitive& g, const Primitive* velocity, double lr,                \
     double momentum, double weight_decay, bool nesterov),                                        \
    (p, g, velocity, lr, momentum, weight_decay, nesterov), SgdUpdate)

// adamw_update(p, g, exp_avg, exp_avg_sq (both null on the first step: zeros), lr, beta1, beta2,
// eps, weight_decay, c1, c2) with c1 = 1 - beta1^t, c2 = 1 - beta2^t at step t:
//   m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
//   p' = p (1 - lr weight_decay) - (lr / c1) m / (sqrt(v / c2) + eps).
#define KILN_FUSED_ADAMW_OPS(X)                                                                   \
  X(FusedAdamW, AdamWStep<Primitive>, adamw_update,                                               \
    (const Primitive& p, const Primitive& g, const Primitive* exp_avg,                            \
     const Primitive* exp_avg_sq, double lr, double beta1, double beta2, double eps,              \
     double weight_decay, double c1, double c2),                                                  \
    (p, g, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, c1, c2), AdamWUpdate)

// The kernel groups (the transformer's softmax, norms, GELU and cross-entropy) and the optimizer
// groups.
#define KILN_FUSED_KERNEL_OPS(X)                                                                  \
  KILN_FUSED_SOFTMAX_OPS(X) KILN_FUSED_NORM_OPS(X) KILN_FUSED_GELU_OPS(X)                         \
  KILN_FUSED_CROSS_ENTROPY_OPS(X)
#define KILN_FUSED_OPTIMIZER_OPS(X) KILN_FUSED_SGD_OPS(X) KILN_FUSED_ADAMW_OPS(X)
#define KILN_FUSED_OPS(X) KILN_FUSED_KERNEL_OPS(X) KILN_FUSED_ATTENTION_OPS(X) KILN_FUSED_LINEAR_OPS(X) \
  KILN_FUSED_OPTIMIZER_OPS(X)

// ---- Declarations, for a backend struct (after its `Primitive` and `Device`) -----------------

#define KILN_OP_DECLARATION(Result, name, params, args) static Result name params;
#define KILN_FUSED_OP_DECLARATION(Group, Result, name, params, args, composition)                 \
  static Result name params;

// Every core op (the Backend concept).
#define KILN_DECLARE_BACKEND_OPS() KILN_CORE_OPS(KILN_OP_DECLARATION)
// The fused kernel groups (FusedSoftmax, FusedNorm, FusedGelu, FusedCrossEntropy).
#define KILN_DECLARE_FUSED_KERNEL_OPS() KILN_FUSED_KERNEL_OPS(KILN_FUSED_OP_DECLARATION)
// FusedAttention (the CPU's so far; the others compose it).
#define KILN_DECLARE_FUSED_ATTENTION_OPS() KILN_FUSED_ATTENTION_OPS(KILN_FUSED_OP_DECLARATION)
// FusedLinear (the CPU's so far).
#define KILN_DECLARE_FUSED_LINEAR_OPS() KILN_FUSED_LINEAR_OPS(KILN_FUSED_OP_DECLARATION)
// The optimizer groups (FusedSgd, FusedAdamW).
#define KILN_DECLARE_FUSED_OPTIMIZER_OPS() KILN_FUSED_OPTIMIZER_OPS(KILN_FUSED_OP_DECLARATION)

// `(a, b)` -> `a, b`: a row's arguments as an argument list.
#define KILN_OP_ARGS(...) __VA_ARGS__

// clang-format on

#endif  // KILN_TENSOR_OP_TABLE_H_
