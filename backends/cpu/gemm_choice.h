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

struct GemmChoice {
  bool avx512 = false;  // f32: kiln's AVX-512 kernel, f64: Eigen's AVX-512 build (else AVX2)
  Bf16Kernel bf16 = Bf16Kernel::kWidenToF32;
  // Without avx512, f32 on kiln's own AVX2 kernel (gemm_f32_avx2.h: the same bits for any thread
  // count) rather than Eigen's AVX2 GEMM (faster at some shapes, sums that depend on the split).
  bool kiln_avx2 = false;
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

// `forced` is KILN_CPU_GEMM's value (nullptr or empty: unset): avx2, kiln-avx2 (f32 on kiln's own
// AVX2 kernel), avx512 (f32 on AVX-512, bf16 widened to f32 as on AVX2), avx512bf16 or amx. InvalidArgument names a
// value that is not one of them or that the CPU (or Linux) cannot run.
absl::StatusOr<GemmChoice> ChooseGemm(const char* forced, GemmFeatures cpu);

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_GEMM_CHOICE_H_
