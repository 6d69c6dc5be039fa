// The fused kernels of tensor/fused_ops.h on the CPU: each row (the last dim) is read once into
// cache and finished there, rows split across the device's threads. A row is never split, and
// the column sums of the norm backward run over rows in order, so no result depends on the
// thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "Eigen/Core"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/half_blocks.h"
#include "backends/cpu/kernels.h"
#include "tensor/error.h"
#include "tensor/half_in_f32.h"
#include "unsupported/Eigen/SpecialFunctions"

namespace kiln {

using cpu::ForFloat;
using cpu::StridedTensor;

namespace {

template <class T>
using RowOf = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstRowOf = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// The shape without its last dim, and the rows and columns it splits into.
struct Rows {
  Shape outer;
  int64_t count, width;
};
Rows RowsOf(const Shape& s) {
  Dims outer(s.dims().begin(), s.dims().end() - 1);
  Rows r{Shape(outer), 1, s[s.rank() - 1]};
  for (int64_t d : outer) r.count *= d;
  return r;
}

// Rows per work item: about 16K elements, at least one row.
int64_t Grain(int64_t width) { return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(width, 1)); }

// Columns of row `r` that a causal mask keeps: j <= i + (sk - sq), i = r's position in dim -2.
int64_t CausalKeep(int64_t r, int64_t sq, int64_t sk) { return std::clamp<int64_t>(r % sq + sk - sq + 1, 0, sk); }

template <class T>
void SoftmaxRow(const T* x, T* y, int64_t n, int64_t keep, bool log) {
  constexpr T kNaN = std::numeric_limits<T>::quiet_NaN();
  if (keep == 0) {
    std::fill(y, y + n, kNaN);
    return;
  }
  const ConstRowOf<T> xr(x, keep);
  RowOf<T> yr(y, keep);
  const T m = xr.template maxCoeff<Eigen::PropagateNaN>();
  if (log) {
    const T lse = m + std::log((xr - m).exp().sum());
    yr = xr - lse;
  } else {
    yr = (xr - m).exp();
    yr *= T(1) / yr.sum();
  }
  std::fill(y + keep, y + n, log ? -std::numeric_limits<T>::infinity() : T(0));
}

template <class T>
void SoftmaxBackwardRow(const T* y, const T* gy, T* gx, int64_t n, int64_t keep, bool log) {
  const ConstRowOf<T> yr(y, keep), gr(gy, keep);
  RowOf<T> out(gx, keep);
  if (log) {
    out = gr - yr.exp() * gr.sum();
  } else {
    out = yr * (gr - (gr * yr).sum());
  }
  std::fill(gx + keep, gx + n, T(0));
}

}  // namespace

Cpu::Primitive Cpu::softmax_last(const Primitive& x, bool log, bool causal) {
  if (IsHalf(x.dtype)) return HalfInF32<Cpu>::softmax_last(x, log, causal);
  const StridedTensor in = contiguous(x);
  StridedTensor out = StridedTensor::Empty(x.shape, x.dtype, x.device);
  const Rows rows = RowsOf(x.shape);
  const int64_t sq = causal ? x.shape[x.shape.rank() - 2] : 1;
  ForFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    const T* src = in.data<T>();
    T* dst = out.mutable_data<T>();
    cpu::ParallelFor(x.device, rows.count, Grain(rows.width), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t keep = causal ? CausalKeep(r, sq, rows.width) : rows.width;
        SoftmaxRow(src + r * rows.width, dst + r * rows.width, rows.width, keep, log);
      }
    });
  });
  return out;
}

Cpu::Primitive Cpu::softmax_last_backward(const Primitive& y, const Primitive& gy, bool log, bool causal) {
  if (IsHalf(y.dtype)) return HalfInF32<Cpu>::softmax_last_backward(y, gy, log, causal);
  const StridedTensor yc = contiguous(y), gc = contiguous(gy);
  StridedTensor out = StridedTensor::Empty(y.shape, y.dtype, y.device);
  const Rows rows = RowsOf(y.shape);
  const int64_t sq = causal ? y.shape[y.shape.rank() - 2] : 1;
  ForFloat(y.dtype, [&](auto t) {
    using T = decltype(t);
    const T *yv = yc.data<T>(), *gv = gc.data<T>();
    T* dst = out.mutable_data<T>();
    cpu::ParallelFor(y.device, rows.count, Grain(rows.width), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t keep = causal ? CausalKeep(r, sq, rows.width) : rows.width;
        const int64_t at = r * rows.width;
        SoftmaxBackwardRow(yv + at, gv + at, dst + at, rows.width, keep, log);
      }
    });
  });
  return out;
}

NormForward<Cpu::Primitive> Cpu::norm_last(const Primitive& x, const Primitive* weight, const Primitive* bias,
                                           double eps, bool rms) {
  if (IsHalf(x.dtype)) return HalfInF32<Cpu>::norm_last(x, weight, bias, eps, rms);
  const StridedTensor in = contiguous(x);
  const StridedTensor w = weight ? contiguous(*weight) : StridedTensor{};
  const StridedTensor b = bias ? contiguous(*bias) : StridedTensor{};
  const Rows rows = RowsOf(x.shape);
  NormForward<Primitive> out{
      StridedTensor::Empty(x.shape, x.dtype, x.device), StridedTensor::Empty(rows.outer, x.dtype, x.device), {}};
  out.rstd = rms ? out.mean : StridedTensor::Empty(rows.outer, x.dtype, x.device);
  ForFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    const int64_t n = rows.width;
    const T* src = in.data<T>();
    const T* wv = weight ? w.data<T>() : nullptr;
    const T* bv = bias ? b.data<T>() : nullptr;
    T *dst = out.y.mutable_data<T>(), *mean = out.mean.mutable_data<T>(), *rstd = out.rstd.mutable_data<T>();
    cpu::ParallelFor(x.device, rows.count, Grain(n), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const ConstRowOf<T> xr(src + r * n, n);
        RowOf<T> yr(dst + r * n, n);
        // Two passes over a row that stays in cache: the variance without cancellation.
        const T mu = rms ? T(0) : xr.sum() / T(n);
        const T s = T(1) / std::sqrt((xr - mu).square().sum() / T(n) + T(eps));
        if (!rms) mean[r] = mu;
        rstd[r] = s;
        yr = (xr - mu) * s;
        if (wv) yr *= ConstRowOf<T>(wv, n);
        if (bv) yr += ConstRowOf<T>(bv, n);
      }
    });
  });
  return out;
}

NormBackward<Cpu::Primitive> Cpu::norm_last_backward(const Primitive& gy, const Primitive& x, const Primitive* weight,
                                                     const Primitive& mean, const Primitive& rstd, bool rms,
                                                     bool bias_grad) {
  if (IsHalf(x.dtype)) return HalfInF32<Cpu>::norm_last_backward(gy, x, weight, mean, rstd, rms, bias_grad);
  const StridedTensor gc = contiguous(gy), xc = contiguous(x), mc = contiguous(mean), sc = contiguous(rstd);
  const StridedTensor w = weight ? contiguous(*weight) : StridedTensor{};
  const Rows rows = RowsOf(x.shape);
  const int64_t n = rows.width;
  const Shape param({n});
  NormBackward<Primitive> out;
  out.x_grad = StridedTensor::Empty(x.shape, x.dtype, x.device);
  if (weight) out.weight_grad = StridedTensor::Empty(param, x.dtype, x.device);
  if (bias_grad) out.bias_grad = StridedTensor::Empty(param, x.dtype, x.device);
  ForFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    const T *g = gc.data<T>(), *xv = xc.data<T>(), *mu = mc.data<T>(), *s = sc.data<T>();
    const T* wv = weight ? w.data<T>() : nullptr;
    T* gx = out.x_grad.mutable_data<T>();
    cpu::ParallelFor(x.device, rows.count, Grain(n), [&](int64_t begin, int64_t end) {
      Eigen::Array<T, Eigen::Dynamic, 1> xhat(n), gw(n);
      for (int64_t r = begin; r < end; ++r) {
        const T m = rms ? T(0) : mu[r];
        xhat = (ConstRowOf<T>(xv + r * n, n) - m) * s[r];
        const ConstRowOf<T> gr(g + r * n, n);
        if (wv) {
          gw = gr * ConstRowOf<T>(wv, n);
        } else {
          gw = gr;
        }
        const T dot = (gw * xhat).sum() / T(n);
        const T shift = rms ? T(0) : gw.sum() / T(n);
        RowOf<T>(gx + r * n, n) = s[r] * (gw - shift - xhat * dot);
      }
    });
    if (!weight && !bias_grad) return;
    // Column sums over rows in row order, columns split across threads: deterministic.
    T* dw = weight ? out.weight_grad.template mutable_data<T>() : nullptr;
    T* db = bias_grad ? out.bias_grad.template mutable_data<T>() : nullptr;
    constexpr int64_t kColumns = 64;
    const int64_t blocks = (n + kColumns - 1) / kColumns;
    cpu::ParallelFor(x.device, blocks, std::max<int64_t>(1, blocks / 64), [&](int64_t begin, int64_t end) {
      for (int64_t block = begin; block < end; ++block) {
        const int64_t c0 = block * kColumns, width = std::min(kColumns, n - c0);
        Eigen::Array<T, Eigen::Dynamic, 1> sw = Eigen::Array<T, Eigen::Dynamic, 1>::Zero(width), sb = sw;
        for (int64_t r = 0; r < rows.count; ++r) {
          const ConstRowOf<T> gr(g + r * n + c0, width);
          if (dw) sw += gr * ((ConstRowOf<T>(xv + r * n + c0, width) - (rms ? T(0) : mu[r])) * s[r]);
          if (db) sb += gr;
        }
        if (dw) RowOf<T>(dw + c0, width) = sw;
        if (db) RowOf<T>(db + c0, width) = sb;
      }
    });
  });
  return out;
}

namespace {
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

// f(x run, out run) over the elements, split across threads (ParallelForElements: the bits do
// not depend on the split).
template <class F>
void MapChunks(const CpuDevice& device, int64_t n, F f) {
  cpu::ParallelForElements(device, n, 1 << 14, [&](int64_t begin, int64_t end) { f(begin, end - begin); });
}

template <class T>
void GeluRun(const T* x, T* y, int64_t n, bool tanh) {
  const ConstRowOf<T> v(x, n);
  if (tanh) {
    RowOf<T>(y, n) = T(0.5) * v * (T(1) + (T(kSqrt2OverPi) * (v + T(kGeluCubic) * v.cube())).tanh());
  } else {
    RowOf<T>(y, n) = T(0.5) * v * (T(1) + (v * T(std::numbers::sqrt2 / 2)).erf());
  }
}

template <class T>
void GeluBackwardRun(const T* x, const T* g, T* y, int64_t n, bool tanh) {
  if (tanh) {
    // tanh is needed twice: kept for blocks of 256 on the stack (no heap array, in cache).
    constexpr int64_t kBlock = 256;
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t len = std::min(kBlock, n - i);
      const ConstRowOf<T> vb(x + i, len), gb(g + i, len);
      const Eigen::Array<T, Eigen::Dynamic, 1, 0, kBlock, 1> th =
          (T(kSqrt2OverPi) * (vb + T(kGeluCubic) * vb.cube())).tanh();
      RowOf<T>(y + i, len) = gb * (T(0.5) * (T(1) + th) + T(0.5) * vb * (T(1) - th.square()) * T(kSqrt2OverPi) *
                                                              (T(1) + T(3 * kGeluCubic) * vb.square()));
    }
  } else {
    const ConstRowOf<T> v(x, n), gr(g, n);
    const T inv_sqrt_2pi = T(0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2);
    RowOf<T>(y, n) = gr * (T(0.5) * (T(1) + (v * T(std::numbers::sqrt2 / 2)).erf()) +
                           v * inv_sqrt_2pi * (T(-0.5) * v.square()).exp());
  }
}
}  // namespace

// Half operands are widened block by block inside the pass (backends/cpu/half_blocks.h).
Cpu::Primitive Cpu::gelu(const Primitive& x, bool tanh) {
  const StridedTensor in = contiguous(x);
  StridedTensor out = StridedTensor::Empty(x.shape, x.dtype, x.device);
  cpu::ForFloatOrHalf(x.dtype, [&](auto t) {
    using T = decltype(t);
    const T* src = in.data<T>();
    T* dst = out.mutable_data<T>();
    MapChunks(x.device, x.shape.numel(), [&](int64_t at, int64_t n) {
      if constexpr (kIsHalf<T>) {
        cpu::InF32Blocks<1>({src + at}, dst + at, n,
                            [&](const auto& v, float* y, int64_t m) { GeluRun(v[0], y, m, tanh); });
      } else {
        GeluRun(src + at, dst + at, n, tanh);
      }
    });
  });
  return out;
}

Cpu::Primitive Cpu::gelu_backward(const Primitive& x, const Primitive& gy, bool tanh) {
  const StridedTensor in = contiguous(x), gc = contiguous(gy);
  StridedTensor out = StridedTensor::Empty(x.shape, x.dtype, x.device);
  cpu::ForFloatOrHalf(x.dtype, [&](auto t) {
    using T = decltype(t);
    const T *src = in.data<T>(), *g = gc.data<T>();
    T* dst = out.mutable_data<T>();
    MapChunks(x.device, x.shape.numel(), [&](int64_t at, int64_t n) {
      if constexpr (kIsHalf<T>) {
        cpu::InF32Blocks<2>({src + at, g + at}, dst + at, n,
                            [&](const auto& v, float* y, int64_t m) { GeluBackwardRun(v[0], v[1], y, m, tanh); });
      } else {
        GeluBackwardRun(src + at, g + at, dst + at, n, tanh);
      }
    });
  });
  return out;
}

namespace {
// The targets as i64 values, each checked to be a class or ignore_index.
std::vector<int64_t> CheckedTargets(const StridedTensor& targets, int64_t classes, int64_t ignore_index) {
  const StridedTensor t = Cpu::contiguous(targets);
  const int64_t* v = t.data<int64_t>();
  std::vector<int64_t> out(v, v + t.shape.numel());
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] != ignore_index && (out[i] < 0 || out[i] >= classes)) {
      ThrowOutOfRange("cross_entropy: target %d of row %d is outside [0, %d)", out[i], i, classes);
    }
  }
  return out;
}
}  // namespace

CrossEntropyForward<Cpu::Primitive> Cpu::cross_entropy_rows(const Primitive& logits, const Primitive& targets,
                                                            int64_t ignore_index, double smoothing) {
  if (IsHalf(logits.dtype)) return HalfInF32<Cpu>::cross_entropy_rows(logits, targets, ignore_index, smoothing);
  const Rows rows = RowsOf(logits.shape);
  const std::vector<int64_t> y = CheckedTargets(targets, rows.width, ignore_index);
  const StridedTensor in = contiguous(logits);
  CrossEntropyForward<Primitive> out{StridedTensor::Empty(rows.outer, logits.dtype, logits.device),
                                     StridedTensor::Empty(rows.outer, logits.dtype, logits.device)};
  ForFloat(logits.dtype, [&](auto t) {
    using T = decltype(t);
    const int64_t n = rows.width;
    const T* src = in.data<T>();
    T *loss = out.loss.mutable_data<T>(), *lse = out.lse.mutable_data<T>();
    const T s = T(smoothing);
    cpu::ParallelFor(logits.device, rows.count, Grain(n), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const ConstRowOf<T> xr(src + r * n, n);
        const T m = xr.template maxCoeff<Eigen::PropagateNaN>();
        lse[r] = m + std::log((xr - m).exp().sum());
        if (y[r] == ignore_index) {
          loss[r] = T(0);
          continue;
        }
        T l = lse[r] - (T(1) - s) * xr[y[r]];
        if (smoothing != 0) l -= s / T(n) * xr.sum();
        loss[r] = l;
      }
    });
  });
  return out;
}

Cpu::Primitive Cpu::cross_entropy_rows_backward(const Primitive& logits, const Primitive& targets, const Primitive& lse,
                                                const Primitive& g, int64_t ignore_index, double smoothing) {
  if (IsHalf(logits.dtype))
    return HalfInF32<Cpu>::cross_entropy_rows_backward(logits, targets, lse, g, ignore_index, smoothing);
  const Rows rows = RowsOf(logits.shape);
  const std::vector<int64_t> y = CheckedTargets(targets, rows.width, ignore_index);
  const StridedTensor in = contiguous(logits), lc = contiguous(lse), gc = contiguous(g);
  StridedTensor out = StridedTensor::Empty(logits.shape, logits.dtype, logits.device);
  ForFloat(logits.dtype, [&](auto t) {
    using T = decltype(t);
    const int64_t n = rows.width;
    const T *src = in.data<T>(), *l = lc.data<T>(), *gv = gc.data<T>();
    T* dst = out.mutable_data<T>();
    const T s = T(smoothing);
    cpu::ParallelFor(logits.device, rows.count, Grain(n), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        RowOf<T> gx(dst + r * n, n);
        if (y[r] == ignore_index) {
          gx.setZero();
          continue;
        }
        gx = gv[r] * ((ConstRowOf<T>(src + r * n, n) - l[r]).exp() - s / T(n));
        gx[y[r]] -= gv[r] * (T(1) - s);
      }
    });
  });
  return out;
}

}  // namespace kiln
