// Device-side helpers shared by the kernel files: launch geometry, the dtype switch and the
// scalar semantics (integer wrap, saturating casts, NaN propagation) the CPU backend defines.
#ifndef KILN_BACKENDS_CUDA_KERNELS_COMMON_CUH_
#define KILN_BACKENDS_CUDA_KERNELS_COMMON_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "backends/cuda/kernels/strided_index.h"
#include "tensor/dtype.h"

namespace kiln::cuda::kernels {

inline constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items. Capped so the count fits any grid dimension
// limit (and each thread does several items for huge n); the loops use 64-bit indices.
inline unsigned int BlocksFor(int64_t n, int64_t per_block = kThreads) {
  const int64_t blocks = (n + per_block - 1) / per_block;
  constexpr int64_t kMaxBlocks = 1 << 18;
  return static_cast<unsigned int>(blocks < kMaxBlocks ? (blocks < 1 ? 1 : blocks) : kMaxBlocks);
}

__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Calls f(T{}) for the C++ type of `dtype` (host side, choosing a kernel instantiation).
template <class F>
decltype(auto) ForDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f(float{});
    case DType::kF64: return f(double{});
    case DType::kI32: return f(int32_t{});
    case DType::kI64: return f(int64_t{});
    case DType::kBool: break;
  }
  return f(bool{});
}

template <class T>
__device__ __forceinline__ T WrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

// max/min that propagate NaN (a + b is NaN when either is), as the CPU backend does.
template <class T>
__device__ __forceinline__ T NanMax(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (isnan(a) || isnan(b)) return a + b;
  }
  return a > b ? a : b;
}
template <class T>
__device__ __forceinline__ T NanMin(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (isnan(a) || isnan(b)) return a + b;
  }
  return a < b ? a : b;
}

// Float -> int saturates and maps NaN to 0; anything -> bool is != 0.
template <class To, class From>
__device__ __forceinline__ To Convert(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (isnan(x)) return To(0);
    if (x <= static_cast<From>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (x >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

}  // namespace kiln::cuda::kernels

#endif  // KILN_BACKENDS_CUDA_KERNELS_COMMON_CUH_
