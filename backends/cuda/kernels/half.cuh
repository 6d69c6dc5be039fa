// bf16 and f16 inside kernels: storage types (__nv_bfloat16, __half) whose values are loaded
// to f32, computed on in f32 and stored rounded to nearest even, once per result. NaN is
// stored with kiln's bits (tensor/half.h: sign and top payload kept, made quiet) because the
// hardware conversion (cvt.rn.bf16.f32 / cvt.rn.f16.f32) gives the canonical NaN 0x7fff
// instead; every other value rounds the same both ways, so CPU and GPU agree bit for bit.
#ifndef KILN_BACKENDS_CUDA_KERNELS_HALF_CUH_
#define KILN_BACKENDS_CUDA_KERNELS_HALF_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "tensor/half.h"

namespace kiln::cuda::kernels {

template <class T>
inline constexpr bool kIsDeviceHalf = std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

// The type a kernel computes in for storage type T: f32 for the halves, T itself otherwise.
template <class T>
using MathT = std::conditional_t<kIsDeviceHalf<T>, float, T>;

template <class T>
__host__ __device__ __forceinline__ MathT<T> Load(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(x);
  } else if constexpr (std::is_same_v<T, __half>) {
    return __half2float(x);
  } else {
    return x;
  }
}

// A half from its bits (host or device).
template <class T>
__host__ __device__ __forceinline__ T HalfFromBits(unsigned short bits) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return __nv_bfloat16(raw);
  } else {
    __half_raw raw;
    raw.x = bits;
    return __half(raw);
  }
}

// f32 -> T, rounding to nearest even for the halves.
template <class T>
__device__ __forceinline__ T Store(MathT<T> v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (v != v) return HalfFromBits<T>(half_bits::FloatToBf16(v));
    return __float2bfloat16_rn(v);
  } else if constexpr (std::is_same_v<T, __half>) {
    if (v != v) return HalfFromBits<T>(half_bits::FloatToF16(v));
    return __float2half_rn(v);
  } else {
    return v;
  }
}

// A double as a half, correctly rounded (round to odd into f32 first, as tensor/half.h does:
// rounding the double to f32 to nearest and then to the half could round twice).
template <class T>
__host__ __device__ __forceinline__ T HalfFromDouble(double d) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return HalfFromBits<T>(half_bits::FloatToBf16(half_bits::DoubleToFloatOdd(d)));
  } else {
    return HalfFromBits<T>(half_bits::FloatToF16(half_bits::DoubleToFloatOdd(d)));
  }
}

}  // namespace kiln::cuda::kernels

#endif  // KILN_BACKENDS_CUDA_KERNELS_HALF_CUH_
