// Device-side helpers shared by the kernel files: launch geometry and the dtype switch (the
// per-element semantics are in scalar_ops.h).
#ifndef KILN_BACKENDS_CUDA_KERNELS_COMMON_CUH_
#define KILN_BACKENDS_CUDA_KERNELS_COMMON_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "backends/cuda/kernels/half.cuh"
#include "backends/cuda/kernels/scalar_ops.h"
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
__device__ __forceinline__ int64_t GridThreads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Calls f(T{}) for the C++ type of `dtype` (host side, choosing a kernel instantiation); the
// halves are their CUDA storage types (half.cuh), which a kernel loads to f32.
template <class F>
decltype(auto) ForDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f(float{});
    case DType::kF64: return f(double{});
    case DType::kI32: return f(int32_t{});
    case DType::kI64: return f(int64_t{});
    case DType::kBF16: return f(__nv_bfloat16{});
    case DType::kF16: return f(__half{});
    case DType::kBool: break;
  }
  return f(bool{});
}

// Any conversion between kernel types: through f32 for the halves (a half to an integer
// saturates as an f32 would), a wider source rounded to the half once (HalfFromDouble), a half
// to its own type copied bit for bit (a signalling NaN stays as it is, as in a CPU copy).
template <class To, class From>
__device__ __forceinline__ To ConvertAny(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (kIsDeviceHalf<To>) {
    if constexpr (kIsDeviceHalf<From> || std::is_same_v<From, float>) {
      return Store<To>(Load(x));
    } else if constexpr (std::is_same_v<From, bool>) {
      return Store<To>(x ? 1.0f : 0.0f);
    } else {
      return HalfFromDouble<To>(static_cast<double>(x));
    }
  } else if constexpr (kIsDeviceHalf<From>) {
    return Convert<To>(Load(x));
  } else {
    return Convert<To>(x);
  }
}

}  // namespace kiln::cuda::kernels

#endif  // KILN_BACKENDS_CUDA_KERNELS_COMMON_CUH_
