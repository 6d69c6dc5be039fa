// Fill, copy/cast, unary, binary and where kernels. Each is a grid-stride loop; dense aligned
// operands take a vectorised kernel, any other layout the strided one (whose `flat` index
// still skips the offset arithmetic when only alignment ruled the vector kernel out).
#include <cmath>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace kiln::cuda::kernels {
namespace {

template <class T>
__global__ void FillKernel(T* out, int64_t n, T value) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) out[i] = value;
}

// The per-element operations, as functors so one strided and one dense kernel serve them all.
template <class To, class From>
struct ConvertFn {
  __device__ To operator()(From x) const { return ConvertAny<To, From>(x); }
};

// A half op: the f32 functor F on the loaded values, its result rounded once (comparisons
// return bool, which passes through).
template <class T, class F>
struct InF32 {
  F f;
  __device__ auto operator()(T x) const {
    if constexpr (std::is_same_v<decltype(f(Load(x))), bool>) {
      return f(Load(x));
    } else {
      return Store<T>(f(Load(x)));
    }
  }
  __device__ auto operator()(T x, T y) const {
    if constexpr (std::is_same_v<decltype(f(Load(x), Load(y))), bool>) {
      return f(Load(x), Load(y));
    } else {
      return Store<T>(f(Load(x), Load(y)));
    }
  }
};

// F<T> for an ordinary type; for a half, F<float> wrapped in InF32.
template <template <class> class F, class T, class... Args>
auto MakeFn(Args... args) {
  if constexpr (kIsDeviceHalf<T>) {
    return InF32<T, F<float>>{F<float>{args...}};
  } else {
    return F<T>{args...};
  }
}

template <class T>
struct UnaryFn {
  UnaryOp op;
  __device__ T operator()(T x) const {
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
        case UnaryOp::kErf: return erf(x);
      }
      return x;
    } else {
      return IntegerUnary(op, x);
    }
  }
};

template <class T>
struct ArithmeticFn {
  BinaryOp op;
  int* div_by_zero;  // set by an integer division by zero; the host reads it back
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (op == BinaryOp::kPow) return y == T(2) ? x * x : pow(x, y);
      return FloatBinary(op, x, y);
    } else {
      return IntegerBinary(op, x, y, div_by_zero);
    }
  }
};

template <class T>
struct CompareFn {
  BinaryOp op;
  __device__ bool operator()(T x, T y) const { return Compare(op, x, y); }
};

// Any layout: offsets through the index (which skips the arithmetic when all are dense).
template <class F, class Out, class A>
__global__ void StridedUnaryKernel(F f, const A* a, Out* out, StridedIndex<2> index, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t off[2];
    index.Offsets(i, off);
    out[off[0]] = f(a[off[1]]);
  }
}

template <class F, class Out, class A, class B>
__global__ void StridedBinaryKernel(F f, const A* a, const B* b, Out* out, StridedIndex<3> index, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t off[3];
    index.Offsets(i, off);
    out[off[0]] = f(a[off[1]], b[off[2]]);
  }
}

// Dense and aligned operands: each thread takes V consecutive elements per step through one
// load or store of up to 16 bytes per operand, so a warp moves whole cache lines in a single
// instruction (scalar accesses reached 0.6-0.8 of cudaMemcpy's bandwidth on an H200).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <class T, int V>
bool Aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(Pack<T, V>) == 0;
}

template <int V, class F, class Out, class A>
__global__ void DenseUnaryKernel(F f, const A* a, Out* out, int64_t n) {
  const int64_t packs = n / V;
  for (int64_t p = GlobalThread(); p < packs; p += GridThreads()) {
    const Pack<A, V> x = reinterpret_cast<const Pack<A, V>*>(a)[p];
    Pack<Out, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = f(x.v[j]);
    reinterpret_cast<Pack<Out, V>*>(out)[p] = y;
  }
  for (int64_t i = packs * V + GlobalThread(); i < n; i += GridThreads()) out[i] = f(a[i]);
}

template <int V, class F, class Out, class A, class B>
__global__ void DenseBinaryKernel(F f, const A* a, const B* b, Out* out, int64_t n) {
  const int64_t packs = n / V;
  for (int64_t p = GlobalThread(); p < packs; p += GridThreads()) {
    const Pack<A, V> x = reinterpret_cast<const Pack<A, V>*>(a)[p];
    const Pack<B, V> y = reinterpret_cast<const Pack<B, V>*>(b)[p];
    Pack<Out, V> z;
#pragma unroll
    for (int j = 0; j < V; ++j) z.v[j] = f(x.v[j], y.v[j]);
    reinterpret_cast<Pack<Out, V>*>(out)[p] = z;
  }
  for (int64_t i = packs * V + GlobalThread(); i < n; i += GridThreads()) out[i] = f(a[i], b[i]);
}

template <class F, class Out, class A>
void LaunchUnary(F f, const A* a, Out* out, const StridedIndex<2>& index, int64_t n, cudaStream_t stream) {
  constexpr int V = 16 / (sizeof(A) > sizeof(Out) ? sizeof(A) : sizeof(Out));
  if (index.flat && Aligned<A, V>(a) && Aligned<Out, V>(out)) {
    DenseUnaryKernel<V><<<BlocksFor(n / V), kThreads, 0, stream>>>(f, a, out, n);
  } else {
    StridedUnaryKernel<<<BlocksFor(n), kThreads, 0, stream>>>(f, a, out, index, n);
  }
}

template <class F, class Out, class T>
void LaunchBinary(F f, const T* a, const T* b, Out* out, const StridedIndex<3>& index, int64_t n, cudaStream_t stream) {
  constexpr int V = 16 / (sizeof(T) > sizeof(Out) ? sizeof(T) : sizeof(Out));
  if (index.flat && Aligned<T, V>(a) && Aligned<T, V>(b) && Aligned<Out, V>(out)) {
    DenseBinaryKernel<V><<<BlocksFor(n / V), kThreads, 0, stream>>>(f, a, b, out, n);
  } else {
    StridedBinaryKernel<<<BlocksFor(n), kThreads, 0, stream>>>(f, a, b, out, index, n);
  }
}

template <class T>
__global__ void WhereKernel(const bool* cond, const T* a, const T* b, T* out, StridedIndex<4> index, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t off[4];
    index.Offsets(i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

}  // namespace

cudaError_t Fill(DType dtype, void* out, int64_t n, double fvalue, int64_t ivalue, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    T value;
    if constexpr (kIsDeviceHalf<T>)
      value = HalfFromDouble<T>(fvalue);
    else if constexpr (std::is_floating_point_v<T>)
      value = static_cast<T>(fvalue);
    else
      value = static_cast<T>(ivalue);  // the host saturated it already
    FillKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<T*>(out), n, value);
  });
  return cudaGetLastError();
}

cudaError_t Copy(DType from, DType to, const void* in, void* out, const StridedIndex<2>& index, int64_t n,
                 cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(from, [&](auto f) {
    ForDType(to, [&](auto t) {
      using From = decltype(f);
      using To = decltype(t);
      LaunchUnary(ConvertFn<To, From>{}, static_cast<const From*>(in), static_cast<To*>(out), index, n, stream);
    });
  });
  return cudaGetLastError();
}

cudaError_t Unary(UnaryOp op, DType dtype, const void* in, void* out, const StridedIndex<2>& index, int64_t n,
                  cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (!std::is_same_v<T, bool>) {
      LaunchUnary(MakeFn<UnaryFn, T>(op), static_cast<const T*>(in), static_cast<T*>(out), index, n, stream);
    }
  });
  return cudaGetLastError();
}

cudaError_t Binary(BinaryOp op, DType dtype, const void* a, const void* b, void* out, const StridedIndex<3>& index,
                   int64_t n, int* div_by_zero, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    if (IsComparison(op)) {
      LaunchBinary(MakeFn<CompareFn, T>(op), pa, pb, static_cast<bool*>(out), index, n, stream);
    } else if constexpr (!std::is_same_v<T, bool>) {
      LaunchBinary(MakeFn<ArithmeticFn, T>(op, div_by_zero), pa, pb, static_cast<T*>(out), index, n, stream);
    }
  });
  return cudaGetLastError();
}

cudaError_t Where(DType dtype, const bool* cond, const void* a, const void* b, void* out, const StridedIndex<4>& index,
                  int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    WhereKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(cond, static_cast<const T*>(a), static_cast<const T*>(b),
                                                          static_cast<T*>(out), index, n);
  });
  return cudaGetLastError();
}

}  // namespace kiln::cuda::kernels
