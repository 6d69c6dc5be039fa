// The fused kernels of tensor/fused_ops.h: softmax, layer/RMS norm, GELU and cross-entropy,
// each forward and backward in one pass over its rows (one workgroup per row), where the
// composition of plain ops would take several. Inputs are made dense first; results are dense.
#include <bit>

#include "backends/vulkan/launch.h"
#include "backends/vulkan/vulkan_backend.h"
#include "tensor/half_in_f32.h"

namespace kiln {

using vulkan::Context;
using vulkan::VulkanTensor;

namespace {

// Push constants; each mirrors its shader's Params block (std430: 8-byte fields first).
struct SoftmaxParams {  // softmax_rows.comp
  uint64_t out, x;
  int32_t rows, len, sq, shift, log, causal;
};
struct SoftmaxBackwardParams {
  uint64_t out, y, gy;
  int32_t rows, len, sq, shift, log, causal;
};
struct NormParams {
  uint64_t y, mean, rstd, x, weight, bias, eps;
  int32_t rows, len, rms, has_weight, has_bias;
};
struct NormBackwardParams {
  uint64_t gx, gy, x, weight, mean, rstd;
  int32_t rows, len, rms, has_weight;
};
struct NormParamGradParams {
  uint64_t weight_part, bias_part, gy, x, mean, rstd;
  int32_t rows, len, chunks, chunk_rows, rms, has_weight, has_bias;
};
struct GeluParams {
  uint64_t out, x, gy;
  int32_t n, tanh, backward;
};
struct CrossEntropyParams {
  uint64_t loss, lse, x, targets, smoothing;
  int64_t ignore_index;
  int32_t rows, len;
};
struct CrossEntropyBackwardParams {
  uint64_t gx, x, targets, lse, g, smoothing;
  int64_t ignore_index;
  int32_t n, len;
};
static_assert(sizeof(NormParams) <= 128 && sizeof(NormParamGradParams) <= 128 &&
              sizeof(CrossEntropyBackwardParams) <= 128);

// Rows of the weight and bias gradients' partial sums: fixed, so the sums do not depend on
// the device.
constexpr int64_t kParamChunkRows = 64;

// A double as the bits of the kernel's T (f32 kernels take the float's bits in the low half).
uint64_t Bits(double v, DType dtype) {
  return dtype == DType::kF64 ? std::bit_cast<uint64_t>(v) : std::bit_cast<uint32_t>(static_cast<float>(v));
}

void RequireFloat(const VulkanTensor& x, const char* op) {
  if (!IsFloating(x.dtype)) ThrowInvalidArgument("%s: not defined for %s", op, DTypeName(x.dtype));
  vulkan::RequireDType(x.context(), x.dtype, op);
}

// The last dim's extent (1 for a scalar: one row of one).
int64_t RowLength(const Shape& s) { return s.rank() == 0 ? 1 : s[s.rank() - 1]; }

// Without its last dim: the shape of per-row results (rows of a [.., 0] input still count).
Shape RowsShape(const Shape& s) {
  if (s.rank() == 0) ThrowInvalidArgument("fused row op: needs rank >= 1, got a scalar");
  return Shape(s.dims().subspan(0, s.rank() - 1));
}

VulkanTensor Dense(const VulkanTensor& t) { return Vulkan::contiguous(t); }

// A fresh [n] of zeros: the gradient sums over no rows.
VulkanTensor Zeros(int64_t n, const VulkanTensor& like) {
  return Vulkan::full(Shape({n}), Scalar(0), like.dtype, like.device);
}

// The causal mask's (sq, sk - sq) for x's last two dims.
std::pair<int32_t, int32_t> CausalBlock(const Shape& s, bool causal, const char* op) {
  if (!causal) return {1, 0};
  if (s.rank() < 2) ThrowInvalidArgument("%s: causal needs rank >= 2, got %s", op, s.ToString());
  const int64_t sq = s[s.rank() - 2], sk = s[s.rank() - 1];
  return {static_cast<int32_t>(sq), static_cast<int32_t>(sk - sq)};
}

// Targets must be i64 [N] for [N, C] logits, each in [0, C) or ignore_index: checked on the
// host before a kernel reads through one, free when the targets' range is known (uploaded
// from the host), a read-back otherwise; the first bad row is named.
void CheckTargets(const VulkanTensor& logits, const VulkanTensor& targets, int64_t ignore_index) {
  if (logits.shape.rank() != 2 || targets.dtype != DType::kI64 || targets.shape.rank() != 1 ||
      targets.shape[0] != logits.shape[0]) {
    ThrowInvalidArgument("cross_entropy: needs [N, C] logits and i64 [N] targets, got %s and %s%s",
                         logits.shape.ToString(), DTypeName(targets.dtype), targets.shape.ToString());
  }
  const int64_t classes = logits.shape[1];
  if (const auto& r = targets.buffer->known_range; r && r->first >= 0 && r->second < classes) return;
  if (targets.shape.numel() == 0) return;
  const TensorData values = Vulkan::to_data(targets);
  const auto t = values.values<int64_t>();
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (t[i] != ignore_index && (t[i] < 0 || t[i] >= classes)) {
      ThrowOutOfRange("cross_entropy: target %d of row %d is outside [0, %d)", t[i], i, classes);
    }
  }
}

}  // namespace

Vulkan::Primitive Vulkan::softmax_last(const Primitive& x_in, bool log, bool causal) {
  if (IsHalf(x_in.dtype)) return HalfInF32<Vulkan>::softmax_last(x_in, log, causal);
  const char* op = log ? "log_softmax" : "softmax";
  RequireFloat(x_in, op);
  const auto [sq, shift] = CausalBlock(x_in.shape, causal, op);
  VulkanTensor out = VulkanTensor::Empty(x_in.shape, x_in.dtype, x_in.device);
  if (x_in.shape.numel() == 0) return out;
  const VulkanTensor x = Dense(x_in);
  const int64_t len = RowLength(x.shape), rows = x.shape.numel() / len;
  SoftmaxParams p{.out = out.address(),
                  .x = x.address(),
                  .rows = static_cast<int32_t>(rows),
                  .len = static_cast<int32_t>(len),
                  .sq = sq,
                  .shift = shift,
                  .log = log,
                  .causal = causal};
  Context& c = x.context();
  c.Launch(vulkan::Kernel("softmax_rows", x.dtype), &p, sizeof(p), c.Exact(rows, 1));
  return out;
}

Vulkan::Primitive Vulkan::softmax_last_backward(const Primitive& y_in, const Primitive& gy_in, bool log, bool causal) {
  if (IsHalf(y_in.dtype)) return HalfInF32<Vulkan>::softmax_last_backward(y_in, gy_in, log, causal);
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  RequireFloat(y_in, op);
  const auto [sq, shift] = CausalBlock(y_in.shape, causal, op);
  VulkanTensor out = VulkanTensor::Empty(y_in.shape, y_in.dtype, y_in.device);
  if (y_in.shape.numel() == 0) return out;
  const VulkanTensor y = Dense(y_in), gy = Dense(gy_in);
  const int64_t len = RowLength(y.shape), rows = y.shape.numel() / len;
  SoftmaxBackwardParams p{.out = out.address(),
                          .y = y.address(),
                          .gy = gy.address(),
                          .rows = static_cast<int32_t>(rows),
                          .len = static_cast<int32_t>(len),
                          .sq = sq,
                          .shift = shift,
                          .log = log,
                          .causal = causal};
  Context& c = y.context();
  c.Launch(vulkan::Kernel("softmax_backward", y.dtype), &p, sizeof(p), c.Exact(rows, 1));
  return out;
}

NormForward<Vulkan::Primitive> Vulkan::norm_last(const Primitive& x_in, const Primitive* weight_in,
                                                 const Primitive* bias_in, double eps, bool rms) {
  if (IsHalf(x_in.dtype)) return HalfInF32<Vulkan>::norm_last(x_in, weight_in, bias_in, eps, rms);
  const char* op = rms ? "rms_norm" : "layer_norm";
  RequireFloat(x_in, op);
  const Shape rows_shape = RowsShape(x_in.shape);
  const int64_t len = RowLength(x_in.shape), rows = rows_shape.numel();
  for (const Primitive* param : {weight_in, bias_in}) {
    if (param != nullptr && param->shape != Shape({len})) {
      ThrowInvalidArgument("%s: weight and bias must be [%d], got %s", op, len, param->shape.ToString());
    }
  }
  NormForward<Primitive> out{.y = VulkanTensor::Empty(x_in.shape, x_in.dtype, x_in.device),
                             .mean = VulkanTensor::Empty(rows_shape, x_in.dtype, x_in.device),
                             .rstd = VulkanTensor::Empty(rows_shape, x_in.dtype, x_in.device)};
  if (rows == 0) return out;
  // Rows of length 0 still get a mean and rstd (NaN, as 0 / 0).
  const VulkanTensor x = Dense(x_in);
  VulkanTensor weight, bias;
  if (weight_in != nullptr) weight = Dense(*weight_in);
  if (bias_in != nullptr) bias = Dense(*bias_in);
  NormParams p{.y = out.y.address(),
               .mean = out.mean.address(),
               .rstd = out.rstd.address(),
               .x = x.address(),
               .weight = weight_in != nullptr ? weight.address() : 0,
               .bias = bias_in != nullptr ? bias.address() : 0,
               .eps = Bits(eps, x.dtype),
               .rows = static_cast<int32_t>(rows),
               .len = static_cast<int32_t>(len),
               .rms = rms,
               .has_weight = weight_in != nullptr,
               .has_bias = bias_in != nullptr};
  Context& c = x.context();
  c.Launch(vulkan::Kernel("norm_rows", x.dtype), &p, sizeof(p), c.Exact(rows, 1));
  return out;
}

namespace {

// The weight and bias gradients of a norm into `out`: column sums in two fixed-order stages,
// chunks of kParamChunkRows rows in one kernel, then the chunks by a plain sum (which reduces in
// a fixed order too: one invocation per column, or a fixed tree).
void NormParamGrads(const VulkanTensor& gy, const VulkanTensor& x, const VulkanTensor& mean, const VulkanTensor& rstd,
                    bool rms, bool weight_grad, bool bias_grad, NormBackward<VulkanTensor>& out) {
  const int64_t len = RowLength(x.shape), rows = RowsShape(x.shape).numel();
  const int64_t chunks = (rows + kParamChunkRows - 1) / kParamChunkRows;
  const Shape part_shape({chunks, len});
  VulkanTensor weight_part, bias_part;
  if (weight_grad) weight_part = VulkanTensor::Empty(part_shape, x.dtype, x.device);
  if (bias_grad) bias_part = VulkanTensor::Empty(part_shape, x.dtype, x.device);
  NormParamGradParams q{.weight_part = weight_grad ? weight_part.address() : 0,
                        .bias_part = bias_grad ? bias_part.address() : 0,
                        .gy = gy.address(),
                        .x = x.address(),
                        .mean = mean.address(),
                        .rstd = rstd.address(),
                        .rows = static_cast<int32_t>(rows),
                        .len = static_cast<int32_t>(len),
                        .chunks = static_cast<int32_t>(chunks),
                        .chunk_rows = static_cast<int32_t>(kParamChunkRows),
                        .rms = rms,
                        .has_weight = weight_grad,
                        .has_bias = bias_grad};
  Context& c = x.context();
  c.Launch(vulkan::Kernel("norm_param_grad", x.dtype), &q, sizeof(q), c.Linear(chunks * len));
  const auto finish = [&](const VulkanTensor& part) {
    if (chunks == 1) return Vulkan::reshape(part, Shape({len}));
    const int64_t dims[] = {0};
    return Vulkan::reduce(ReduceOp::kSum, part, dims, false);
  };
  if (weight_grad) out.weight_grad = finish(weight_part);
  if (bias_grad) out.bias_grad = finish(bias_part);
}

}  // namespace

NormBackward<Vulkan::Primitive> Vulkan::norm_last_backward(const Primitive& gy_in, const Primitive& x_in,
                                                           const Primitive* weight_in, const Primitive& mean_in,
                                                           const Primitive& rstd_in, bool rms, bool bias_grad) {
  if (IsHalf(x_in.dtype))
    return HalfInF32<Vulkan>::norm_last_backward(gy_in, x_in, weight_in, mean_in, rstd_in, rms, bias_grad);
  const char* op = rms ? "rms_norm_backward" : "layer_norm_backward";
  RequireFloat(x_in, op);
  const int64_t len = RowLength(x_in.shape), rows = RowsShape(x_in.shape).numel();
  if (weight_in != nullptr && weight_in->shape != Shape({len})) {
    ThrowInvalidArgument("%s: weight must be [%d], got %s", op, len, weight_in->shape.ToString());
  }
  NormBackward<Primitive> out;
  out.x_grad = VulkanTensor::Empty(x_in.shape, x_in.dtype, x_in.device);
  if (rows == 0 || len == 0) {  // nothing to normalise: sums over no rows are 0
    if (weight_in != nullptr) out.weight_grad = Zeros(len, x_in);
    if (bias_grad) out.bias_grad = Zeros(len, x_in);
    return out;
  }
  const VulkanTensor gy = Dense(gy_in), x = Dense(x_in), mean = Dense(mean_in), rstd = Dense(rstd_in);
  VulkanTensor weight;
  if (weight_in != nullptr) weight = Dense(*weight_in);
  Context& c = x.context();
  NormBackwardParams p{.gx = out.x_grad.address(),
                       .gy = gy.address(),
                       .x = x.address(),
                       .weight = weight_in != nullptr ? weight.address() : 0,
                       .mean = mean.address(),
                       .rstd = rstd.address(),
                       .rows = static_cast<int32_t>(rows),
                       .len = static_cast<int32_t>(len),
                       .rms = rms,
                       .has_weight = weight_in != nullptr};
  c.Launch(vulkan::Kernel("norm_backward", x.dtype), &p, sizeof(p), c.Exact(rows, 1));
  if (weight_in != nullptr || bias_grad) NormParamGrads(gy, x, mean, rstd, rms, weight_in != nullptr, bias_grad, out);
  return out;
}

namespace {

VulkanTensor Gelu(const VulkanTensor& x_in, const VulkanTensor* gy_in, bool tanh) {
  RequireFloat(x_in, gy_in != nullptr ? "gelu_backward" : "gelu");
  VulkanTensor out = VulkanTensor::Empty(x_in.shape, x_in.dtype, x_in.device);
  const int64_t n = x_in.shape.numel();
  if (n == 0) return out;
  const VulkanTensor x = Vulkan::contiguous(x_in);
  VulkanTensor gy;
  if (gy_in != nullptr) gy = Vulkan::contiguous(*gy_in);
  GeluParams p{.out = out.address(),
               .x = x.address(),
               .gy = gy_in != nullptr ? gy.address() : 0,
               .n = static_cast<int32_t>(n),
               .tanh = tanh,
               .backward = gy_in != nullptr};
  Context& c = x.context();
  c.Launch(vulkan::Kernel("gelu", x.dtype), &p, sizeof(p), c.Linear(n));
  return out;
}

}  // namespace

Vulkan::Primitive Vulkan::gelu(const Primitive& x, bool tanh) {
  if (IsHalf(x.dtype)) return HalfInF32<Vulkan>::gelu(x, tanh);
  return Gelu(x, nullptr, tanh);
}

Vulkan::Primitive Vulkan::gelu_backward(const Primitive& x, const Primitive& gy, bool tanh) {
  if (IsHalf(x.dtype)) return HalfInF32<Vulkan>::gelu_backward(x, gy, tanh);
  return Gelu(x, &gy, tanh);
}

CrossEntropyForward<Vulkan::Primitive> Vulkan::cross_entropy_rows(const Primitive& logits_in,
                                                                  const Primitive& targets_in, int64_t ignore_index,
                                                                  double smoothing) {
  if (IsHalf(logits_in.dtype))
    return HalfInF32<Vulkan>::cross_entropy_rows(logits_in, targets_in, ignore_index, smoothing);
  RequireFloat(logits_in, "cross_entropy");
  CheckTargets(logits_in, targets_in, ignore_index);
  const int64_t rows = logits_in.shape[0], len = logits_in.shape[1];
  CrossEntropyForward<Primitive> out{.loss = VulkanTensor::Empty(Shape({rows}), logits_in.dtype, logits_in.device),
                                     .lse = VulkanTensor::Empty(Shape({rows}), logits_in.dtype, logits_in.device)};
  if (rows == 0) return out;
  const VulkanTensor x = Dense(logits_in), targets = Dense(targets_in);
  CrossEntropyParams p{.loss = out.loss.address(),
                       .lse = out.lse.address(),
                       .x = x.address(),
                       .targets = targets.address(),
                       .smoothing = Bits(smoothing, x.dtype),
                       .ignore_index = ignore_index,
                       .rows = static_cast<int32_t>(rows),
                       .len = static_cast<int32_t>(len)};
  Context& c = x.context();
  c.Launch(vulkan::Kernel("cross_entropy", x.dtype), &p, sizeof(p), c.Exact(rows, 1));
  return out;
}

Vulkan::Primitive Vulkan::cross_entropy_rows_backward(const Primitive& logits_in, const Primitive& targets_in,
                                                      const Primitive& lse_in, const Primitive& g_in,
                                                      int64_t ignore_index, double smoothing) {
  if (IsHalf(logits_in.dtype))
    return HalfInF32<Vulkan>::cross_entropy_rows_backward(logits_in, targets_in, lse_in, g_in, ignore_index, smoothing);
  RequireFloat(logits_in, "cross_entropy_backward");
  CheckTargets(logits_in, targets_in, ignore_index);
  VulkanTensor out = VulkanTensor::Empty(logits_in.shape, logits_in.dtype, logits_in.device);
  const int64_t n = logits_in.shape.numel();
  if (n == 0) return out;
  const VulkanTensor x = Dense(logits_in), targets = Dense(targets_in), lse = Dense(lse_in), g = Dense(g_in);
  CrossEntropyBackwardParams p{.gx = out.address(),
                               .x = x.address(),
                               .targets = targets.address(),
                               .lse = lse.address(),
                               .g = g.address(),
                               .smoothing = Bits(smoothing, x.dtype),
                               .ignore_index = ignore_index,
                               .n = static_cast<int32_t>(n),
                               .len = static_cast<int32_t>(logits_in.shape[1])};
  Context& c = x.context();
  c.Launch(vulkan::Kernel("cross_entropy_backward", x.dtype), &p, sizeof(p), c.Linear(n));
  return out;
}

}  // namespace kiln
