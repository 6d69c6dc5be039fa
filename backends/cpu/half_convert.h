// Bulk conversions between f32 and the 16-bit float types for the CPU kernels: bit for bit what
// tensor/half.h's scalar functions give for every input (a half op is the same f32 arithmetic,
// rounded once, on every backend and machine), with the fastest path this CPU runs, chosen once
// from CPUID (backends/cpu/half_convert_paths.h lists them).
#ifndef KILN_BACKENDS_CPU_HALF_CONVERT_H_
#define KILN_BACKENDS_CPU_HALF_CONVERT_H_

#include <cstdint>

#include "tensor/half.h"

namespace kiln::cpu {

// out[i] = in[i * stride] for i in [0, n): stride 1 is a plain array, 0 one value repeated, any
// other is gathered in small blocks first. `out` is contiguous; neither needs any alignment.
void HalfToFloat(const BFloat16* in, int64_t stride, float* out, int64_t n);
void HalfToFloat(const Float16* in, int64_t stride, float* out, int64_t n);
void FloatToHalf(const float* in, int64_t stride, BFloat16* out, int64_t n);
void FloatToHalf(const float* in, int64_t stride, Float16* out, int64_t n);

// The name of the path in use, for benchmarks and logs: "scalar", "avx2" or "avx512"
const char* HalfConvertPathName();

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_HALF_CONVERT_H_
