// Which GEMM kernels the CPU backend runs: KILN_CPU_GEMM's value where it is set, else the
// widest the CPU has. A pure function of the value and the CPU's features, so every answer
// (a CPU that lacks what the variable asks for included) is testable on any machine.
#ifndef KILN_BACKENDS_CPU_GEMM_CHOICE_H_
#define KILN_BACKENDS_CPU_GEMM_CHOICE_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln::cpu {

struct GemmFeatures {
  bool avx512 = false;         // AVX-512 F, DQ, VL and BW
  bool avx512_bf16 = false;    // the above and AVX512_BF16 (vdpbf16ps)
  bool amx_bf16 = false;       // the above and AMX-TILE and AMX-BF16 (CPUID)
  bool amx_permitted = false;  // Linux lets this process use AMX tile data (AmxPermission())
};

// The kernel bf16 matmuls run.
enum class Bf16Kernel {
  kWidenToF32,  // operands widened to f32, the f32 GEMM, one rounding (HalfInF32)
  kAvx512Bf16,  // vdpbf16ps (gemm_bf16_avx512.h)
  kAmx,         // AMX tiles, TDPBF16PS (gemm_bf16_amx.h)
};

// The kernel f32 matmuls run; f64 runs Eigen's AVX-512 build with kKilnAvx512, else its AVX2 one.
enum class F32Kernel {
  kKilnAvx2,    // kiln's AVX2 + FMA kernel (gemm_f32_avx2.h), the default without AVX-512
  kEigenAvx2,   // Eigen's AVX2 GEMM (its sums depend on how rows are split over threads)
  kKilnAvx512,  // kiln's AVX-512 kernel (gemm_f32_avx512.h)
};

struct GemmChoice {
  F32Kernel f32 = F32Kernel::kKilnAvx2;
  Bf16Kernel bf16 = Bf16Kernel::kWidenToF32;
};

// What this CPU runs (CPUID). With `ask_linux_for_amx`, where the CPU has AMX, also whether Linux
// lets this process use it (AmxPermission()); without, amx_permitted is false and nothing is asked.
GemmFeatures DetectGemmFeatures(bool ask_linux_for_amx);

// Linux's permission for this process to use AMX tile data (arch_prctl(ARCH_REQ_XCOMP_PERM)),
// asked once, on the first call: without it the first tile instruction raises SIGILL. Not OK
// says why (a CPU without AMX, a kernel before 5.16, a thread's sigaltstack too small for the
// tile state). Once granted, Linux refuses every later sigaltstack() too small for the tile
// state, so only a process that runs AMX asks.
const absl::Status& AmxPermission();

// `forced` is KILN_CPU_GEMM's value (nullptr or empty: unset): kiln-avx2 (f32 on kiln's AVX2
// kernel, bf16 widened to f32), avx2 (the same with Eigen's AVX2 GEMM), avx512 (f32 on AVX-512, bf16
// widened to f32), avx512bf16 or amx. InvalidArgument names a value that is not one of them or
// that the CPU (or Linux) cannot run.
absl::StatusOr<GemmChoice> ChooseGemm(const char* forced, GemmFeatures cpu);

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_GEMM_CHOICE_H_
