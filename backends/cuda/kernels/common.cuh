// Device-side helpers shared by the kernel files: launch geometry and the dtype switch (the
// per-element semantics are in scalar_ops.h).
#ifndef KILN_BACKENDS_CUDA_KERNELS_COMMON_CUH_
#define KILN_BACKENDS_CUDA_KERNELS_COMMON_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <type_traits>

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

}  // namespace kiln::cuda::kernels

#endif  // KILN_BACKENDS_CUDA_KERNELS_COMMON_CUH_
