// The fused kernels of tensor/fused_ops.h: softmax, norms and cross-entropy give one block to a
// row (a grid-stride loop over rows) and combine through warp butterflies and shared memory;
// GELU is a grid-stride loop over elements. Every reduction combines in a fixed order, so
// results do not vary between runs, and the norms' column sums (weight and bias gradients) are
// partial sums over fixed chunks of rows finished by a second kernel: no atomics on floats.
#include <cmath>
#include <limits>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace kiln::cuda::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kMaxRowThreads = 512;
constexpr int kMaxWarps = 1024 / kWarp;  // shared slots: enough for any block size
constexpr unsigned kFullMask = 0xffffffffu;

// A butterfly leaves the same value in every lane: a + b == b + a in floating point, so the
// lanes of each pair compute identical bits at every step.
template <class T>
__device__ __forceinline__ T WarpSum(T v) {
  for (int m = kWarp / 2; m > 0; m /= 2) v += __shfl_xor_sync(kFullMask, v, m);
  return v;
}
template <class T>
__device__ __forceinline__ T WarpMax(T v) {
  for (int m = kWarp / 2; m > 0; m /= 2) v = NanMax(v, __shfl_xor_sync(kFullMask, v, m));
  return v;
}

// The block's total in every thread. blockDim.x is a multiple of the warp size. The first
// barrier keeps a warp from overwriting `shared` while another still reads the previous
// reduction's values from it.
template <class T>
__device__ __forceinline__ T BlockSum(T v, T* shared) {
  v = WarpSum(v);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  return WarpSum(lane < warps ? shared[lane] : T(0));
}
template <class T>
__device__ __forceinline__ T BlockMax(T v, T* shared) {
  v = WarpMax(v);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  return WarpMax(lane < warps ? shared[lane] : -std::numeric_limits<T>::infinity());
}

template <class T>
__device__ __forceinline__ T Nan() {
  return std::numeric_limits<T>::quiet_NaN();
}

// Columns row r keeps: all n, or with the causal mask (row r % sq of an [sq, n] matrix) those
// j <= r % sq + n - sq, clamped to [0, n].
__device__ __forceinline__ int64_t KeptColumns(int64_t r, int64_t n, int64_t sq, bool causal) {
  if (!causal) return n;
  const int64_t kept = r % sq + (n - sq) + 1;
  return kept < 0 ? 0 : (kept > n ? n : kept);
}

template <class T>
__global__ void SoftmaxKernel(const T* x, T* y, int64_t rows, int64_t n, int64_t sq, bool causal, bool log_softmax) {
  __shared__ T shared[kMaxWarps];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {  // uniform in the block: barriers are safe
    const T* xr = x + r * n;
    T* yr = y + r * n;
    const int64_t kept = KeptColumns(r, n, sq, causal);
    if (kept == 0) {  // every column masked: NaN, as the composition's 0/0 gives
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = Nan<T>();
      continue;
    }
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t j = threadIdx.x; j < kept; j += blockDim.x) m = NanMax(m, xr[j]);
    m = BlockMax(m, shared);
    T s = 0;
    for (int64_t j = threadIdx.x; j < kept; j += blockDim.x) s += exp(xr[j] - m);
    s = BlockSum(s, shared);
    const T log_s = log(s);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      if (j < kept) {
        yr[j] = log_softmax ? xr[j] - m - log_s : exp(xr[j] - m) / s;
      } else {
        yr[j] = log_softmax ? -std::numeric_limits<T>::infinity() : T(0);
      }
    }
  }
}

// softmax gx = y (gy - sum(gy y)), log-softmax gx = gy - exp(y) sum(gy), over the kept
// columns; masked columns get 0.
template <class T>
__global__ void SoftmaxBackwardKernel(const T* y, const T* gy, T* gx, int64_t rows, int64_t n, int64_t sq, bool causal,
                                      bool log_softmax) {
  __shared__ T shared[kMaxWarps];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* yr = y + r * n;
    const T* gr = gy + r * n;
    T* out = gx + r * n;
    const int64_t kept = KeptColumns(r, n, sq, causal);
    T s = 0;
    for (int64_t j = threadIdx.x; j < kept; j += blockDim.x) s += log_softmax ? gr[j] : gr[j] * yr[j];
    s = BlockSum(s, shared);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      if (j < kept) {
        out[j] = log_softmax ? gr[j] - exp(yr[j]) * s : yr[j] * (gr[j] - s);
      } else {
        out[j] = T(0);
      }
    }
  }
}

// Layer norm: two passes (the mean, then the squared deviations from it), so the variance
// does not cancel. RMS norm: one pass over x^2, and `mean` is rstd again.
template <class T>
__global__ void NormKernel(const T* x, const T* weight, const T* bias, T* y, T* mean, T* rstd, int64_t rows, int64_t n,
                           T eps, bool rms) {
  __shared__ T shared[kMaxWarps];
  const T count = static_cast<T>(n);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    T mu = 0, rs;
    if (rms) {
      T ss = 0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) ss += xr[j] * xr[j];
      ss = BlockSum(ss, shared);
      rs = T(1) / sqrt(ss / count + eps);
    } else {
      T s = 0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += xr[j];
      mu = BlockSum(s, shared) / count;
      T ss = 0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const T d = xr[j] - mu;
        ss += d * d;
      }
      ss = BlockSum(ss, shared);
      rs = T(1) / sqrt(ss / count + eps);
    }
    if (threadIdx.x == 0) {
      mean[r] = rms ? rs : mu;
      rstd[r] = rs;
    }
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      T v = (xr[j] - mu) * rs;
      if (weight != nullptr) v *= weight[j];
      if (bias != nullptr) v += bias[j];
      yr[j] = v;
    }
  }
}

// With xhat = (x - mean) rstd (rms: x rstd) and g = gy weight:
// layer gx = rstd (g - mean(g) - xhat mean(g xhat)), rms gx = rstd (g - xhat mean(g xhat)).
template <class T>
__global__ void NormBackwardKernel(const T* gy, const T* x, const T* weight, const T* mean, const T* rstd, T* gx,
                                   int64_t rows, int64_t n, bool rms) {
  __shared__ T shared[kMaxWarps];
  const T count = static_cast<T>(n);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    const T* gr = gy + r * n;
    T* out = gx + r * n;
    const T mu = rms ? T(0) : mean[r];  // rms's `mean` holds rstd, not a mean
    const T rs = rstd[r];
    T sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const T g = weight != nullptr ? gr[j] * weight[j] : gr[j];
      sg += g;
      sgx += g * ((xr[j] - mu) * rs);
    }
    const T mean_g = rms ? T(0) : BlockSum(sg, shared) / count;  // rms is uniform in the block
    const T mean_gx = BlockSum(sgx, shared) / count;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const T g = weight != nullptr ? gr[j] * weight[j] : gr[j];
      out[j] = rs * (g - mean_g - (xr[j] - mu) * rs * mean_gx);
    }
  }
}

// Partial column sums of one chunk of rows (blockIdx.y): thread c sums its column down the
// chunk in row order. pw (gy xhat) and pb (gy) are [chunks, n]; either may be null.
template <class T>
__global__ void NormColumnPartialsKernel(const T* gy, const T* x, const T* mean, const T* rstd, T* pw, T* pb,
                                         int64_t rows, int64_t n, int64_t chunk, bool rms) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n) return;  // no barriers here
  const int64_t k = blockIdx.y;
  const int64_t begin = k * chunk;
  const int64_t end = begin + chunk < rows ? begin + chunk : rows;
  T sw = 0, sb = 0;
  for (int64_t r = begin; r < end; ++r) {
    const T g = gy[r * n + c];
    if (pw != nullptr) sw += g * ((x[r * n + c] - (rms ? T(0) : mean[r])) * rstd[r]);
    sb += g;
  }
  if (pw != nullptr) pw[k * n + c] = sw;
  if (pb != nullptr) pb[k * n + c] = sb;
}

// out[c] = sum over chunks k, in order, of partial[k, c].
template <class T>
__global__ void SumChunksKernel(const T* partial, T* out, int64_t chunks, int64_t n) {
  for (int64_t c = GlobalThread(); c < n; c += GridThreads()) {
    T s = 0;
    for (int64_t k = 0; k < chunks; ++k) s += partial[k * n + c];
    out[c] = s;
  }
}

constexpr double kSqrtHalf = 0.70710678118654752440;     // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

template <class T>
__global__ void GeluKernel(const T* x, T* y, int64_t n, bool tanh_form) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const T v = x[i];
    if (tanh_form) {
      y[i] = T(0.5) * v * (T(1) + tanh(T(kSqrt2OverPi) * (v + T(kGeluCubic) * v * v * v)));
    } else {
      y[i] = T(0.5) * v * (T(1) + erf(v * T(kSqrtHalf)));
    }
  }
}

// exact: gelu' = Phi(x) + x phi(x); tanh form with u = k (x + c x^3), t = tanh(u):
// gelu' = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2).
template <class T>
__global__ void GeluBackwardKernel(const T* x, const T* gy, T* gx, int64_t n, bool tanh_form) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const T v = x[i];
    T d;
    if (tanh_form) {
      const T t = tanh(T(kSqrt2OverPi) * (v + T(kGeluCubic) * v * v * v));
      d = T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * v * v);
    } else {
      d = T(0.5) * (T(1) + erf(v * T(kSqrtHalf))) + v * T(kInvSqrt2Pi) * exp(T(-0.5) * v * v);
    }
    gx[i] = gy[i] * d;
  }
}

// loss = lse - (1 - s) x[t] - (s / C) sum(x), 0 where t == ignore. A target outside [0, C)
// lowers *first_bad to its row (the host reads it back and throws) and is never read through.
template <class T>
__global__ void CrossEntropyKernel(const T* x, const int64_t* targets, T* loss, T* lse, int64_t rows, int64_t classes,
                                   int64_t ignore, T smoothing, unsigned long long* first_bad) {
  __shared__ T shared[kMaxWarps];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * classes;
    T m = -std::numeric_limits<T>::infinity(), sx = 0;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
      m = NanMax(m, xr[j]);
      sx += xr[j];
    }
    m = BlockMax(m, shared);
    // Skipped without smoothing, so that 0 * inf cannot make a NaN of a finite loss.
    if (smoothing != T(0)) sx = BlockSum(sx, shared);
    T s = 0;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) s += exp(xr[j] - m);
    s = BlockSum(s, shared);
    if (threadIdx.x == 0) {
      const T l = m + log(s);
      lse[r] = l;
      const int64_t t = targets[r];
      if (t == ignore) {
        loss[r] = T(0);
      } else if (t < 0 || t >= classes) {
        atomicMin(first_bad, static_cast<unsigned long long>(r));
        loss[r] = Nan<T>();
      } else {
        T v = l - (T(1) - smoothing) * xr[t];
        if (smoothing != T(0)) v -= smoothing / static_cast<T>(classes) * sx;
        loss[r] = v;
      }
    }
  }
}

// gx = g[r] (exp(x - lse) - (1 - s) onehot(t) - s / C), 0 on ignored rows. A bad target
// matches no column, so it is harmless here (the forward pass reports it).
template <class T>
__global__ void CrossEntropyBackwardKernel(const T* x, const int64_t* targets, const T* lse, const T* g, T* gx,
                                           int64_t rows, int64_t classes, int64_t ignore, T smoothing) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * classes;
    T* out = gx + r * classes;
    const int64_t t = targets[r];
    const T gr = g[r], l = lse[r], uniform = smoothing / static_cast<T>(classes);
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
      if (t == ignore) {
        out[j] = T(0);
      } else {
        out[j] = gr * (exp(xr[j] - l) - (j == t ? T(1) - smoothing : T(0)) - uniform);
      }
    }
  }
}

// Threads for a row of n: the smallest multiple of the warp size that covers it, up to
// kMaxRowThreads (longer rows loop).
unsigned int RowThreads(int64_t n) {
  int64_t t = kWarp;
  while (t < n && t < kMaxRowThreads) t *= 2;
  return static_cast<unsigned int>(t);
}

// Calls f(T{}) for f32 and f64; other dtypes never reach these kernels (the host checks).
template <class F>
cudaError_t ForFloat(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: f(float{}); break;
    case DType::kF64: f(double{}); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t SoftmaxLast(DType dtype, const void* x, void* y, int64_t rows, int64_t n, int64_t sq, bool causal,
                        bool log_softmax, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  return ForFloat(dtype, [&](auto v) {
    using T = decltype(v);
    SoftmaxKernel<T><<<BlocksFor(rows, 1), RowThreads(n), 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                                       rows, n, sq, causal, log_softmax);
  });
}

cudaError_t SoftmaxLastBackward(DType dtype, const void* y, const void* gy, void* gx, int64_t rows, int64_t n,
                                int64_t sq, bool causal, bool log_softmax, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  return ForFloat(dtype, [&](auto v) {
    using T = decltype(v);
    SoftmaxBackwardKernel<T><<<BlocksFor(rows, 1), RowThreads(n), 0, stream>>>(
        static_cast<const T*>(y), static_cast<const T*>(gy), static_cast<T*>(gx), rows, n, sq, causal, log_softmax);
  });
}

cudaError_t NormLast(DType dtype, const void* x, const void* weight, const void* bias, void* y, void* mean, void* rstd,
                     int64_t rows, int64_t n, double eps, bool rms, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;  // n == 0 still writes each row's (NaN) statistics
  return ForFloat(dtype, [&](auto v) {
    using T = decltype(v);
    NormKernel<T><<<BlocksFor(rows, 1), RowThreads(n), 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias), static_cast<T*>(y),
        static_cast<T*>(mean), static_cast<T*>(rstd), rows, n, static_cast<T>(eps), rms);
  });
}

cudaError_t NormLastBackward(DType dtype, const void* gy, const void* x, const void* weight, const void* mean,
                             const void* rstd, void* gx, int64_t rows, int64_t n, bool rms, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  return ForFloat(dtype, [&](auto v) {
    using T = decltype(v);
    NormBackwardKernel<T><<<BlocksFor(rows, 1), RowThreads(n), 0, stream>>>(
        static_cast<const T*>(gy), static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(mean),
        static_cast<const T*>(rstd), static_cast<T*>(gx), rows, n, rms);
  });
}

cudaError_t NormColumnSums(DType dtype, const void* gy, const void* x, const void* mean, const void* rstd,
                           void* partial_w, void* partial_b, void* weight_grad, void* bias_grad, int64_t rows,
                           int64_t n, bool rms, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int64_t chunk = NormRowChunk(rows);
  const int64_t chunks = NormRowChunks(rows);
  return ForFloat(dtype, [&](auto v) {
    using T = decltype(v);
    if (chunks > 0) {
      const dim3 grid(static_cast<unsigned int>((n + kThreads - 1) / kThreads), static_cast<unsigned int>(chunks));
      NormColumnPartialsKernel<T><<<grid, kThreads, 0, stream>>>(
          static_cast<const T*>(gy), static_cast<const T*>(x), static_cast<const T*>(mean), static_cast<const T*>(rstd),
          static_cast<T*>(partial_w), static_cast<T*>(partial_b), rows, n, chunk, rms);
    }
    // With no rows, zero chunks: the sums are 0.
    if (weight_grad != nullptr) {
      SumChunksKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const T*>(partial_w),
                                                                static_cast<T*>(weight_grad), chunks, n);
    }
    if (bias_grad != nullptr) {
      SumChunksKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const T*>(partial_b),
                                                                static_cast<T*>(bias_grad), chunks, n);
    }
  });
}

cudaError_t Gelu(DType dtype, const void* x, void* y, int64_t n, bool tanh_form, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return ForFloat(dtype, [&](auto v) {
    using T = decltype(v);
    GeluKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n, tanh_form);
  });
}

cudaError_t GeluBackward(DType dtype, const void* x, const void* gy, void* gx, int64_t n, bool tanh_form,
                         cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return ForFloat(dtype, [&](auto v) {
    using T = decltype(v);
    GeluBackwardKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<const T*>(gy),
                                                                 static_cast<T*>(gx), n, tanh_form);
  });
}

cudaError_t CrossEntropy(DType dtype, const void* logits, const int64_t* targets, void* loss, void* lse, int64_t rows,
                         int64_t classes, int64_t ignore_index, double smoothing, unsigned long long* first_bad,
                         cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  return ForFloat(dtype, [&](auto v) {
    using T = decltype(v);
    CrossEntropyKernel<T><<<BlocksFor(rows, 1), RowThreads(classes), 0, stream>>>(
        static_cast<const T*>(logits), targets, static_cast<T*>(loss), static_cast<T*>(lse), rows, classes,
        ignore_index, static_cast<T>(smoothing), first_bad);
  });
}

cudaError_t CrossEntropyBackward(DType dtype, const void* logits, const int64_t* targets, const void* lse,
                                 const void* g, void* grad, int64_t rows, int64_t classes, int64_t ignore_index,
                                 double smoothing, cudaStream_t stream) {
  if (rows <= 0 || classes <= 0) return cudaSuccess;
  return ForFloat(dtype, [&](auto v) {
    using T = decltype(v);
    CrossEntropyBackwardKernel<T><<<BlocksFor(rows, 1), RowThreads(classes), 0, stream>>>(
        static_cast<const T*>(logits), targets, static_cast<const T*>(lse), static_cast<const T*>(g),
        static_cast<T*>(grad), rows, classes, ignore_index, static_cast<T>(smoothing));
  });
}

}  // namespace kiln::cuda::kernels
