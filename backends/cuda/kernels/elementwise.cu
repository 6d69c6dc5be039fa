// Fill, copy/cast, unary, binary and where kernels. Each is a grid-stride loop; a `flat`
// index (every operand dense) skips the offset arithmetic, which keeps the common case at
// memory bandwidth.
#include <cmath>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace kiln::cuda::kernels {
namespace {

template <class T>
__global__ void FillKernel(T* out, int64_t n, T value) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) out[i] = value;
}

template <class To, class From>
__global__ void CopyKernel(const From* in, To* out, StridedIndex<2> index, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t off[2];
    index.Offsets(i, off);
    out[off[0]] = Convert<To>(in[off[1]]);
  }
}

template <class T>
__device__ __forceinline__ T ApplyUnary(UnaryOp op, T x) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case UnaryOp::kNeg: return -x;
      case UnaryOp::kAbs: return fabs(x);
      case UnaryOp::kExp: return exp(x);
      case UnaryOp::kLog: return log(x);
      case UnaryOp::kSqrt: return sqrt(x);
      case UnaryOp::kTanh: return tanh(x);
      case UnaryOp::kSigmoid: return T(1) / (T(1) + exp(-x));
      case UnaryOp::kRelu: return x < T(0) ? T(0) : x;  // NaN stays NaN
    }
    return x;
  } else {
    return IntegerUnary(op, x);
  }
}

template <class T>
__global__ void UnaryKernel(UnaryOp op, const T* in, T* out, StridedIndex<2> index, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t off[2];
    index.Offsets(i, off);
    out[off[0]] = ApplyUnary(op, in[off[1]]);
  }
}

template <class T>
__device__ __forceinline__ T ApplyArithmetic(BinaryOp op, T x, T y, int* div_by_zero) {
  if constexpr (std::is_floating_point_v<T>) {
    if (op == BinaryOp::kPow) return y == T(2) ? x * x : pow(x, y);
    return FloatBinary(op, x, y);
  } else {
    return IntegerBinary(op, x, y, div_by_zero);  // sets the flag the host reads back
  }
}

template <class T>
__global__ void ArithmeticKernel(BinaryOp op, const T* a, const T* b, T* out,
                                 StridedIndex<3> index, int64_t n, int* div_by_zero) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t off[3];
    index.Offsets(i, off);
    out[off[0]] = ApplyArithmetic(op, a[off[1]], b[off[2]], div_by_zero);
  }
}

template <class T>
__global__ void CompareKernel(BinaryOp op, const T* a, const T* b, bool* out,
                              StridedIndex<3> index, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t off[3];
    index.Offsets(i, off);
    out[off[0]] = Compare(op, a[off[1]], b[off[2]]);
  }
}

template <class T>
__global__ void WhereKernel(const bool* cond, const T* a, const T* b, T* out,
                            StridedIndex<4> index, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t off[4];
    index.Offsets(i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

}  // namespace

cudaError_t Fill(DType dtype, void* out, int64_t n, double fvalue, int64_t ivalue,
                 cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    T value;
    if constexpr (std::is_floating_point_v<T>) value = static_cast<T>(fvalue);
    else value = static_cast<T>(ivalue);  // the host saturated it already
    FillKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<T*>(out), n, value);
  });
  return cudaGetLastError();
}

cudaError_t Copy(DType from, DType to, const void* in, void* out, const StridedIndex<2>& index,
                 int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(from, [&](auto f) {
    ForDType(to, [&](auto t) {
      using From = decltype(f);
      using To = decltype(t);
      CopyKernel<To, From><<<BlocksFor(n), kThreads, 0, stream>>>(
          static_cast<const From*>(in), static_cast<To*>(out), index, n);
    });
  });
  return cudaGetLastError();
}

cudaError_t Unary(UnaryOp op, DType dtype, const void* in, void* out,
                  const StridedIndex<2>& index, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (!std::is_same_v<T, bool>) {
      UnaryKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(op, static_cast<const T*>(in),
                                                            static_cast<T*>(out), index, n);
    }
  });
  return cudaGetLastError();
}

cudaError_t Binary(BinaryOp op, DType dtype, const void* a, const void* b, void* out,
                   const StridedIndex<3>& index, int64_t n, int* div_by_zero,
                   cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    if (IsComparison(op)) {
      CompareKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(op, pa, pb, static_cast<bool*>(out),
                                                              index, n);
    } else if constexpr (!std::is_same_v<T, bool>) {
      ArithmeticKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(op, pa, pb, static_cast<T*>(out),
                                                                 index, n, div_by_zero);
    }
  });
  return cudaGetLastError();
}

cudaError_t Where(DType dtype, const bool* cond, const void* a, const void* b, void* out,
                  const StridedIndex<4>& index, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    WhereKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(
        cond, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), index, n);
  });
  return cudaGetLastError();
}

}  // namespace kiln::cuda::kernels
