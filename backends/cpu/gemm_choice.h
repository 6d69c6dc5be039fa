// Which GEMM kernels the CPU backend runs: KILN_CPU_GEMM's value where it is set, else the
// widest the CPU has. A pure function of the value and the CPU's features, so every answer
// (a CPU that lacks what the variable asks for included) is testable on any machine.
#ifndef KILN_BACKENDS_CPU_GEMM_CHOICE_H_
#define KILN_BACKENDS_CPU_GEMM_CHOICE_H_

#include "absl/status/statusor.h"

namespace kiln::cpu {

struct GemmFeatures {
  bool avx512 = false;       // AVX-512 F, DQ, VL and BW
  bool avx512_bf16 = false;  // the above and AVX512_BF16 (vdpbf16ps)
};

struct GemmChoice {
  bool avx512 = false;       // f32/f64: Eigen's AVX-512 build rather than the AVX2 one
  bool native_bf16 = false;  // bf16: vdpbf16ps rather than widening to f32 (HalfInF32)
};

// What this CPU runs (CPUID).
GemmFeatures DetectGemmFeatures();

// `forced` is KILN_CPU_GEMM's value (nullptr or empty: unset): avx2, avx512 (f32 on AVX-512,
// bf16 widened to f32 as on AVX2) or avx512bf16. InvalidArgument names a value that is not one
// of them or that the CPU cannot run.
absl::StatusOr<GemmChoice> ChooseGemm(const char* forced, GemmFeatures cpu);

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_GEMM_CHOICE_H_
