// The implementations behind backends/cpu/half_convert.h: each is the four contiguous
// conversions, built for one instruction set. The dispatcher takes the last one the CPU runs;
// the tests and benchmarks run every one against tensor/half.h's scalar functions.
#ifndef KILN_BACKENDS_CPU_HALF_CONVERT_PATHS_H_
#define KILN_BACKENDS_CPU_HALF_CONVERT_PATHS_H_

#include <cstdint>
#include <span>

#include "tensor/half.h"

namespace kiln::cpu {

struct HalfConvertPath {
  const char* name;
  bool (*supported)();  // whether this CPU runs it
  void (*bf16_to_f32)(const BFloat16* in, float* out, int64_t n);
  void (*f32_to_bf16)(const float* in, BFloat16* out, int64_t n);
  void (*f16_to_f32)(const Float16* in, float* out, int64_t n);
  void (*f32_to_f16)(const float* in, Float16* out, int64_t n);
};

namespace half_convert {

// tensor/half.h's functions in plain loops: the reference, and the path of a CPU without F16C.
// At the build's AVX2 baseline GCC vectorises the bf16 loops (integer shifts and adds) itself.
const HalfConvertPath& Scalar();

// AVX2 and F16C: f16 through vcvtph2ps / vcvtps2ph, f32 -> bf16 in AVX2 integer code, bf16 ->
// f32 as Scalar().
const HalfConvertPath& Avx2();

// AVX-512 F, BW and VL: the AVX2 path's arithmetic on 16 lanes, the tail through masks.
const HalfConvertPath& Avx512();

}  // namespace half_convert

// Every path, the reference first, then in order of preference.
std::span<const HalfConvertPath* const> HalfConvertPaths();

// The path in use: the last in HalfConvertPaths() that this CPU supports, decided once.
const HalfConvertPath& ActiveHalfConvertPath();

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_HALF_CONVERT_PATHS_H_
