#include "backends/cpu/gemm_choice.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "absl/strings/str_format.h"

namespace kiln::cpu {
namespace {

// AMX-TILE and AMX-BF16 from CPUID, and the tile state enabled in XCR0 (what GCC's
// __builtin_cpu_supports("amx-tile") checks; clang 14, which builds the fuzzers, lacks the name).
bool CpuHasAmxBf16() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24;
  if ((d & (kAmxBf16 | kAmxTile)) != (kAmxBf16 | kAmxTile)) return false;
  unsigned xcr0_low, xcr0_high;
  asm volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  constexpr unsigned kTileConfig = 1u << 17, kTileData = 1u << 18;
  return (xcr0_low & (kTileConfig | kTileData)) == (kTileConfig | kTileData);
}

}  // namespace

GemmFeatures DetectGemmFeatures(bool ask_linux_for_amx) {
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  const bool avx512_bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
  const bool amx_bf16 = avx512_bf16 && CpuHasAmxBf16();
  return {.avx512 = avx512,
          .avx512_bf16 = avx512_bf16,
          .amx_bf16 = amx_bf16,
          .amx_permitted = amx_bf16 && ask_linux_for_amx && AmxPermission().ok()};
}

const absl::Status& AmxPermission() {
  static const absl::Status permission = []() -> absl::Status {
    if (!CpuHasAmxBf16()) {
      return absl::FailedPreconditionError("this CPU lacks AMX-TILE/AMX-BF16");
    }
    // From Linux's asm/prctl.h and the x86 XSAVE feature numbers (not in every libc's headers).
    constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) != 0) {
      const int error = errno;
      return absl::FailedPreconditionError(absl::StrFormat(
          "Linux refused AMX tile data to this process: arch_prctl(ARCH_REQ_XCOMP_PERM) failed with %s%s",
          std::strerror(error),
          error == ENOSPC   ? " (a thread's sigaltstack is too small for the tile state)"
          : error == EINVAL ? " (a kernel before 5.16, or no AMX state in XCR0)"
                            : ""));
    }
    return absl::OkStatus();
  }();
  return permission;
}

absl::StatusOr<GemmChoice> ChooseGemm(const char* forced, GemmFeatures cpu) {
  if (forced == nullptr || *forced == '\0') {
    const Bf16Kernel bf16 = cpu.amx_bf16 && cpu.amx_permitted ? Bf16Kernel::kAmx
                            : cpu.avx512_bf16                 ? Bf16Kernel::kAvx512Bf16
                                                              : Bf16Kernel::kWidenToF32;
    return GemmChoice{cpu.avx512 ? F32Kernel::kKilnAvx512 : F32Kernel::kKilnAvx2, bf16};
  }
  const std::string_view value(forced);
  const char* lacks = "";
  if (value == "kiln-avx2") return GemmChoice{F32Kernel::kKilnAvx2, Bf16Kernel::kWidenToF32};
  if (value == "avx2") return GemmChoice{F32Kernel::kEigenAvx2, Bf16Kernel::kWidenToF32};
  if (value == "avx512") {
    if (cpu.avx512) return GemmChoice{F32Kernel::kKilnAvx512, Bf16Kernel::kWidenToF32};
    lacks = " (this CPU lacks AVX-512 F/DQ/VL/BW)";
  } else if (value == "avx512bf16") {
    if (cpu.avx512_bf16) return GemmChoice{F32Kernel::kKilnAvx512, Bf16Kernel::kAvx512Bf16};
    lacks = " (this CPU lacks AVX-512 BF16)";
  } else if (value == "amx") {
    if (cpu.amx_bf16 && cpu.amx_permitted) return GemmChoice{F32Kernel::kKilnAvx512, Bf16Kernel::kAmx};
    lacks = cpu.amx_bf16 ? " (Linux refused this process AMX tile data: see AmxPermission())"
                         : " (this CPU lacks AMX-BF16)";
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("KILN_CPU_GEMM=%s: expected kiln-avx2, avx2, avx512, avx512bf16 or amx%s", value, lacks));
}

}  // namespace kiln::cpu
