// Internal helpers shared by the CPU backend's kernel files.
#ifndef KILN_BACKENDS_CPU_KERNELS_H_
#define KILN_BACKENDS_CPU_KERNELS_H_

#include "backends/cpu/strided_tensor.h"

namespace kiln::cpu {

// `src` (any strides) written as a new row-major tensor of `dtype` (a cast when it differs).
StridedTensor CopyAs(const StridedTensor& src, DType dtype);

// Throws kiln::Error when `device` does not exist.
void RequireDevice(const CpuDevice& device);

// f(T{}) with T the float type of `dtype` (f32 or f64; Tensor<B> passes no other to float-only
// kernels, and half types are computed in f32 before they get here).
template <class F>
void ForFloat(DType dtype, F&& f) {
  if (IsHalf(dtype)) ThrowNotComputedInHalf(dtype);
  if (dtype == DType::kF64) {
    f(double{});
  } else {
    f(float{});
  }
}

// f(T{}) with T the storage type of a float `dtype`, half types included: for kernels that widen
// half operands block by block themselves (backends/cpu/half_blocks.h).
template <class F>
void ForFloatOrHalf(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBF16: return f(BFloat16{});
    case DType::kF16: return f(Float16{});
    default: return ForFloat(dtype, f);
  }
}

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_KERNELS_H_
