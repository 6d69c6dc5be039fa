#include "backends/cpu/gemm_choice.h"

#include <string_view>

#include "absl/strings/str_format.h"

namespace kiln::cpu {

GemmFeatures DetectGemmFeatures() {
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  return {.avx512 = avx512, .avx512_bf16 = avx512 && __builtin_cpu_supports("avx512bf16")};
}

absl::StatusOr<GemmChoice> ChooseGemm(const char* forced, GemmFeatures cpu) {
  if (forced == nullptr || *forced == '\0') return GemmChoice{cpu.avx512, cpu.avx512_bf16};
  const std::string_view value(forced);
  const char* lacks = "";
  if (value == "avx2") return GemmChoice{false, false};
  if (value == "avx512") {
    if (cpu.avx512) return GemmChoice{true, false};
    lacks = " (this CPU lacks AVX-512 F/DQ/VL/BW)";
  } else if (value == "avx512bf16") {
    if (cpu.avx512_bf16) return GemmChoice{true, true};
    lacks = " (this CPU lacks AVX-512 BF16)";
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("KILN_CPU_GEMM=%s: expected avx2, avx512 or avx512bf16%s", value, lacks));
}

}  // namespace kiln::cpu
