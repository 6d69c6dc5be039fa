// The fused kernels of tensor/fused_ops.h: operands are made dense row-major (a copy only for
// views), then one kernel per op, queued like any other (a norm's backward adds two for its
// column sums). Cross-entropy reads back a flag for bad targets, its only synchronising step.
// bf16 and f16 operands run the f32 kernels on widened copies (HalfInF32), rounded once.
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/launch.h"
#include "tensor/half_in_f32.h"

namespace kiln {

using cuda::StridedTensor;

namespace {

void CheckFloat(const StridedTensor& p, const char* op, const char* what) {
  if (!IsFloating(p.dtype)) ThrowInvalidArgument("%s: %s must be f32 or f64, got %s", op, what, DTypeName(p.dtype));
}

// `b` alongside `a`: same dtype and device, and (when `shape` is given) that shape.
void CheckLike(const StridedTensor& a, const StridedTensor& b, const Shape* shape, const char* op, const char* what) {
  if (b.dtype != a.dtype)
    ThrowInvalidArgument("%s: %s is %s, not %s", op, what, DTypeName(b.dtype), DTypeName(a.dtype));
  if (b.device != a.device) {
    ThrowInvalidArgument("%s: %s is on %s, not %s", op, what, b.device.ToString(), a.device.ToString());
  }
  if (shape != nullptr && !(b.shape == *shape)) {
    ThrowInvalidArgument("%s: %s has shape %s, not %s", op, what, b.shape.ToString(), shape->ToString());
  }
}

// A tensor as [rows, n] with n its last dim (a scalar is one row of one).
struct Rows {
  int64_t rows, n;
};
Rows RowsOf(const Shape& s) {
  if (s.rank() == 0) return {1, 1};
  int64_t rows = 1;
  for (int64_t i = 0; i + 1 < s.rank(); ++i) rows *= s[i];
  return {rows, s[s.rank() - 1]};
}

// x's shape without its last dim: the shape of per-row statistics.
Shape RowStatsShape(const Shape& s) {
  Dims dims(s.dims().begin(), s.dims().end());
  if (!dims.empty()) dims.pop_back();
  return Shape(dims);
}

// sq of a causal mask: the second-to-last dim (1 without the mask; its value is unused then).
int64_t CausalRows(const Shape& s, bool causal, const char* op) {
  if (!causal) return 1;
  if (s.rank() < 2) ThrowInvalidArgument("%s: a causal mask needs rank >= 2, got shape %s", op, s.ToString());
  return s[s.rank() - 2];
}

// A dense copy of *p (or *p itself), or an empty tensor (null data) when p is null.
StridedTensor DenseOrNone(const StridedTensor* p) { return p != nullptr ? Cuda::contiguous(*p) : StridedTensor{}; }

}  // namespace

Cuda::Primitive Cuda::softmax_last(const Primitive& x, bool log, bool causal) {
  if (IsHalf(x.dtype)) return HalfInF32<Cuda>::softmax_last(x, log, causal);
  const char* op = log ? "log_softmax" : "softmax";
  CheckFloat(x, op, "x");
  const Rows r = RowsOf(x.shape);
  const int64_t sq = CausalRows(x.shape, causal, op);
  cuda::DeviceContext& c = cuda::Context(x.device);
  cuda::Await(c, {&x});
  const StridedTensor xd = contiguous(x);
  StridedTensor y = StridedTensor::Empty(x.shape, x.dtype, x.device);
  cuda::CheckLaunch(
      cuda::kernels::SoftmaxLast(x.dtype, xd.data(), y.mutable_data(), r.rows, r.n, sq, causal, log, c.stream), op,
      x.device);
  return y;
}

Cuda::Primitive Cuda::softmax_last_backward(const Primitive& y, const Primitive& gy, bool log, bool causal) {
  if (IsHalf(y.dtype)) return HalfInF32<Cuda>::softmax_last_backward(y, gy, log, causal);
  const char* op = log ? "log_softmax backward" : "softmax backward";
  CheckFloat(y, op, "y");
  CheckLike(y, gy, &y.shape, op, "gy");
  const Rows r = RowsOf(y.shape);
  const int64_t sq = CausalRows(y.shape, causal, op);
  cuda::DeviceContext& c = cuda::Context(y.device);
  cuda::Await(c, {&y, &gy});
  const StridedTensor yd = contiguous(y), gyd = contiguous(gy);
  StridedTensor gx = StridedTensor::Empty(y.shape, y.dtype, y.device);
  cuda::CheckLaunch(cuda::kernels::SoftmaxLastBackward(y.dtype, yd.data(), gyd.data(), gx.mutable_data(), r.rows, r.n,
                                                       sq, causal, log, c.stream),
                    op, y.device);
  return gx;
}

NormForward<Cuda::Primitive> Cuda::norm_last(const Primitive& x, const Primitive* weight, const Primitive* bias,
                                             double eps, bool rms) {
  if (IsHalf(x.dtype)) return HalfInF32<Cuda>::norm_last(x, weight, bias, eps, rms);
  const char* op = rms ? "rms_norm" : "layer_norm";
  CheckFloat(x, op, "x");
  const Rows r = RowsOf(x.shape);
  const Shape param{r.n};
  if (weight != nullptr) CheckLike(x, *weight, &param, op, "weight");
  if (bias != nullptr) CheckLike(x, *bias, &param, op, "bias");
  cuda::DeviceContext& c = cuda::Context(x.device);
  cuda::Await(c, {&x});
  if (weight != nullptr) cuda::Await(c, {weight});
  if (bias != nullptr) cuda::Await(c, {bias});
  const StridedTensor xd = contiguous(x), wd = DenseOrNone(weight), bd = DenseOrNone(bias);
  const Shape stats = RowStatsShape(x.shape);
  NormForward<Primitive> out{
      StridedTensor::Empty(x.shape, x.dtype, x.device), StridedTensor::Empty(stats, x.dtype, x.device), {}};
  // rms: mean is rstd again, so both are one tensor (the kernel writes the same value twice).
  out.rstd = rms ? out.mean : StridedTensor::Empty(stats, x.dtype, x.device);
  cuda::CheckLaunch(
      cuda::kernels::NormLast(x.dtype, xd.data(), wd.data(), bd.data(), out.y.mutable_data(), out.mean.mutable_data(),
                              out.rstd.mutable_data(), r.rows, r.n, eps, rms, c.stream),
      op, x.device);
  return out;
}

NormBackward<Cuda::Primitive> Cuda::norm_last_backward(const Primitive& gy, const Primitive& x, const Primitive* weight,
                                                       const Primitive& mean, const Primitive& rstd, bool rms,
                                                       bool bias_grad) {
  if (IsHalf(x.dtype)) return HalfInF32<Cuda>::norm_last_backward(gy, x, weight, mean, rstd, rms, bias_grad);
  const char* op = rms ? "rms_norm backward" : "layer_norm backward";
  CheckFloat(x, op, "x");
  CheckLike(x, gy, &x.shape, op, "gy");
  const Rows r = RowsOf(x.shape);
  const Shape param{r.n}, stats = RowStatsShape(x.shape);
  if (weight != nullptr) CheckLike(x, *weight, &param, op, "weight");
  CheckLike(x, mean, &stats, op, "mean");
  CheckLike(x, rstd, &stats, op, "rstd");
  cuda::DeviceContext& c = cuda::Context(x.device);
  cuda::Await(c, {&gy, &x, &mean, &rstd});
  if (weight != nullptr) cuda::Await(c, {weight});
  const StridedTensor gyd = contiguous(gy), xd = contiguous(x), wd = DenseOrNone(weight);
  const StridedTensor meand = contiguous(mean), rstdd = contiguous(rstd);
  NormBackward<Primitive> out{StridedTensor::Empty(x.shape, x.dtype, x.device), {}, {}};
  cuda::CheckLaunch(
      cuda::kernels::NormLastBackward(x.dtype, gyd.data(), xd.data(), wd.data(), meand.data(), rstdd.data(),
                                      out.x_grad.mutable_data(), r.rows, r.n, rms, c.stream),
      op, x.device);
  const bool weight_grad = weight != nullptr;
  if (!weight_grad && !bias_grad) return out;
  // Per-chunk partial sums (scratch: its memory returns to the allocator in stream order).
  const Shape partial{cuda::kernels::NormRowChunks(r.rows), r.n};
  StridedTensor pw, pb;
  if (weight_grad) {
    out.weight_grad = StridedTensor::Empty(param, x.dtype, x.device);
    pw = StridedTensor::Empty(partial, x.dtype, x.device);
  }
  if (bias_grad) {
    out.bias_grad = StridedTensor::Empty(param, x.dtype, x.device);
    pb = StridedTensor::Empty(partial, x.dtype, x.device);
  }
  cuda::CheckLaunch(cuda::kernels::NormColumnSums(x.dtype, gyd.data(), xd.data(), meand.data(), rstdd.data(),
                                                  pw.mutable_data(), pb.mutable_data(), out.weight_grad.mutable_data(),
                                                  out.bias_grad.mutable_data(), r.rows, r.n, rms, c.stream),
                    op, x.device);
  return out;
}

Cuda::Primitive Cuda::gelu(const Primitive& x, bool tanh) {
  if (IsHalf(x.dtype)) return HalfInF32<Cuda>::gelu(x, tanh);
  CheckFloat(x, "gelu", "x");
  cuda::DeviceContext& c = cuda::Context(x.device);
  cuda::Await(c, {&x});
  const StridedTensor xd = contiguous(x);
  StridedTensor y = StridedTensor::Empty(x.shape, x.dtype, x.device);
  cuda::CheckLaunch(cuda::kernels::Gelu(x.dtype, xd.data(), y.mutable_data(), x.shape.numel(), tanh, c.stream), "gelu",
                    x.device);
  return y;
}

Cuda::Primitive Cuda::gelu_backward(const Primitive& x, const Primitive& gy, bool tanh) {
  if (IsHalf(x.dtype)) return HalfInF32<Cuda>::gelu_backward(x, gy, tanh);
  CheckFloat(x, "gelu backward", "x");
  CheckLike(x, gy, &x.shape, "gelu backward", "gy");
  cuda::DeviceContext& c = cuda::Context(x.device);
  cuda::Await(c, {&x, &gy});
  const StridedTensor xd = contiguous(x), gyd = contiguous(gy);
  StridedTensor gx = StridedTensor::Empty(x.shape, x.dtype, x.device);
  cuda::CheckLaunch(
      cuda::kernels::GeluBackward(x.dtype, xd.data(), gyd.data(), gx.mutable_data(), x.shape.numel(), tanh, c.stream),
      "gelu backward", x.device);
  return gx;
}

namespace {

// logits [N, C] and targets [N] of i64 on logits' device: (N, C).
std::pair<int64_t, int64_t> CrossEntropyRows(const StridedTensor& logits, const StridedTensor& targets,
                                             const char* op) {
  CheckFloat(logits, op, "logits");
  if (logits.shape.rank() != 2) ThrowInvalidArgument("%s: logits must be [N, C], got %s", op, logits.shape.ToString());
  const int64_t n = logits.shape[0];
  if (targets.dtype != DType::kI64)
    ThrowInvalidArgument("%s: targets must be i64, got %s", op, DTypeName(targets.dtype));
  if (targets.device != logits.device) {
    ThrowInvalidArgument("%s: targets are on %s, not %s", op, targets.device.ToString(), logits.device.ToString());
  }
  if (!(targets.shape == Shape{n})) {
    ThrowInvalidArgument("%s: targets must be [%d], got %s", op, n, targets.shape.ToString());
  }
  return {n, logits.shape[1]};
}

}  // namespace

CrossEntropyForward<Cuda::Primitive> Cuda::cross_entropy_rows(const Primitive& logits, const Primitive& targets,
                                                              int64_t ignore_index, double smoothing) {
  if (IsHalf(logits.dtype)) return HalfInF32<Cuda>::cross_entropy_rows(logits, targets, ignore_index, smoothing);
  const auto [n, classes] = CrossEntropyRows(logits, targets, "cross_entropy");
  cuda::DeviceContext& c = cuda::Context(logits.device);
  cuda::Await(c, {&logits, &targets});
  const StridedTensor xd = contiguous(logits), td = contiguous(targets);
  CrossEntropyForward<Primitive> out{StridedTensor::Empty(Shape{n}, logits.dtype, logits.device),
                                     StridedTensor::Empty(Shape{n}, logits.dtype, logits.device)};
  if (n == 0) return out;
  // Bad targets: the kernel lowers the flag to the first bad row and never reads through one.
  cuda::DeviceBuffer flag(logits.device, sizeof(unsigned long long));
  cuda::ThrowIfCuda(cudaMemsetAsync(flag.data(), 0xff, sizeof(unsigned long long), c.stream),
                    "cross_entropy: cudaMemsetAsync");
  auto* first_bad = reinterpret_cast<unsigned long long*>(flag.data());
  const auto* ids = static_cast<const int64_t*>(td.data());
  cuda::CheckLaunch(
      cuda::kernels::CrossEntropy(logits.dtype, xd.data(), ids, out.loss.mutable_data(), out.lse.mutable_data(), n,
                                  classes, ignore_index, smoothing, first_bad, c.stream),
      "cross_entropy", logits.device);
  unsigned long long row = 0;
  cuda::ReadBack(c, first_bad, &row, sizeof(row), "cross_entropy (the target range check)");
  if (row == std::numeric_limits<unsigned long long>::max()) return out;
  int64_t target = 0;
  cuda::ReadBack(c, ids + row, &target, sizeof(target), "cross_entropy (the target range check)");
  ThrowOutOfRange("cross_entropy: target %d of row %d is outside [0, %d)", target, static_cast<int64_t>(row), classes);
}

Cuda::Primitive Cuda::cross_entropy_rows_backward(const Primitive& logits, const Primitive& targets,
                                                  const Primitive& lse, const Primitive& g, int64_t ignore_index,
                                                  double smoothing) {
  if (IsHalf(logits.dtype)) {
    return HalfInF32<Cuda>::cross_entropy_rows_backward(logits, targets, lse, g, ignore_index, smoothing);
  }
  const char* op = "cross_entropy backward";
  const auto [n, classes] = CrossEntropyRows(logits, targets, op);
  const Shape rows{n};
  CheckLike(logits, lse, &rows, op, "lse");
  CheckLike(logits, g, &rows, op, "g");
  cuda::DeviceContext& c = cuda::Context(logits.device);
  cuda::Await(c, {&logits, &targets, &lse, &g});
  const StridedTensor xd = contiguous(logits), td = contiguous(targets), lsed = contiguous(lse), gd = contiguous(g);
  StridedTensor grad = StridedTensor::Empty(logits.shape, logits.dtype, logits.device);
  cuda::CheckLaunch(cuda::kernels::CrossEntropyBackward(logits.dtype, xd.data(), static_cast<const int64_t*>(td.data()),
                                                        lsed.data(), gd.data(), grad.mutable_data(), n, classes,
                                                        ignore_index, smoothing, c.stream),
                    op, logits.device);
  return grad;
}

}  // namespace kiln
