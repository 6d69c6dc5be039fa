// The per-element semantics of the CUDA kernels, as __host__ __device__ functions so that the
// CPU tests check them against the CPU backend's rules (tests/backends/cuda/scalar_ops_test):
// integer arithmetic wraps, integer division truncates (min / -1 wraps), float -> int casts
// saturate with NaN -> 0, max/min propagate NaN, argmax prefers NaN and then the lower index.
// NaN is tested as x != x, which holds on both sides (nothing is built with fast-math).
#ifndef KILN_BACKENDS_CUDA_KERNELS_SCALAR_OPS_H_
#define KILN_BACKENDS_CUDA_KERNELS_SCALAR_OPS_H_

#include <cstdint>
#include <limits>
#include <type_traits>

#include "backends/cuda/kernels/strided_index.h"  // KILN_HOST_DEVICE
#include "tensor/ops.h"

namespace kiln::cuda::kernels {

template <class T>
KILN_HOST_DEVICE inline bool IsNan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  return false;
}

template <class T>
KILN_HOST_DEVICE inline T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

// max/min that propagate NaN (a + b is NaN when either is), as the CPU backend does.
template <class T>
KILN_HOST_DEVICE inline T NanMax(T a, T b) {
  if (IsNan(a) || IsNan(b)) return a + b;
  return a > b ? a : b;
}
template <class T>
KILN_HOST_DEVICE inline T NanMin(T a, T b) {
  if (IsNan(a) || IsNan(b)) return a + b;
  return a < b ? a : b;
}

// Float -> int saturates and maps NaN to 0; anything -> bool is != 0.
template <class To, class From>
KILN_HOST_DEVICE inline To Convert(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (IsNan(x)) return To(0);
    if (x <= static_cast<From>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (x >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

// neg, abs and relu of an integer (the only unary ops integers have); neg and abs of the
// minimum wrap to the minimum.
template <class T>
KILN_HOST_DEVICE inline T IntegerUnary(UnaryOp op, T x) {
  using U = std::make_unsigned_t<T>;
  const T neg = static_cast<T>(U(0) - static_cast<U>(x));
  switch (op) {
    case UnaryOp::kNeg: return neg;
    case UnaryOp::kAbs: return x < 0 ? neg : x;
    case UnaryOp::kRelu: return x < 0 ? T(0) : x;
    default: return x;  // float-only ops never reach integer tensors
  }
}

// Integer arithmetic; a zero divisor gives 0 and sets *div_by_zero (when not null).
template <class T>
KILN_HOST_DEVICE inline T IntegerBinary(BinaryOp op, T x, T y, int* div_by_zero) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case BinaryOp::kAdd: return static_cast<T>(U(x) + U(y));
    case BinaryOp::kSub: return static_cast<T>(U(x) - U(y));
    case BinaryOp::kMul: return static_cast<T>(U(x) * U(y));
    case BinaryOp::kDiv:
      if (y == 0) {
        if (div_by_zero != nullptr) *div_by_zero = 1;
        return T(0);
      }
      return y == T(-1) ? static_cast<T>(U(0) - U(x)) : T(x / y);
    case BinaryOp::kMaximum: return x > y ? x : y;
    case BinaryOp::kMinimum: return x < y ? x : y;
    default: return x;  // pow is float-only
  }
}

// Float arithmetic other than pow (which the kernel does with the device's pow).
template <class T>
KILN_HOST_DEVICE inline T FloatBinary(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::kAdd: return x + y;
    case BinaryOp::kSub: return x - y;
    case BinaryOp::kMul: return x * y;
    case BinaryOp::kDiv: return x / y;
    case BinaryOp::kMaximum: return NanMax(x, y);
    case BinaryOp::kMinimum: return NanMin(x, y);
    default: return x;
  }
}

template <class T>
KILN_HOST_DEVICE inline bool Compare(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::kEq: return x == y;
    case BinaryOp::kNe: return x != y;
    case BinaryOp::kLt: return x < y;
    case BinaryOp::kLe: return x <= y;
    case BinaryOp::kGt: return x > y;
    case BinaryOp::kGe: return x >= y;
    default: return false;
  }
}

// Whether (v, i) beats the current best (best, best_i) for argmax: NaN is the largest value,
// and among equal values the lower index wins, so combining in any order (a tree) gives the
// first maximum.
template <class V>
KILN_HOST_DEVICE inline bool ArgmaxBetter(V v, int64_t i, V best, int64_t best_i) {
  const bool n = IsNan(v), nb = IsNan(best);
  if (n || nb) return n && (!nb || i < best_i);
  return v > best || (v == best && i < best_i);
}

}  // namespace kiln::cuda::kernels

#endif  // KILN_BACKENDS_CUDA_KERNELS_SCALAR_OPS_H_
