// KILN_CPU_GEMM's values against every kind of CPU (backends/cpu/gemm_choice.h), so what a CPU
// without AVX-512, without AVX-512 BF16 or without AMX (or a process Linux refuses AMX) would do
// is checked on any machine.
#include "backends/cpu/gemm_choice.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace kiln::cpu {
namespace {

constexpr GemmFeatures kAvx2Only{}, kAvx512{.avx512 = true}, kAvx512Bf16{.avx512 = true, .avx512_bf16 = true};
constexpr GemmFeatures kAmx{.avx512 = true, .avx512_bf16 = true, .amx_bf16 = true, .amx_permitted = true};
// A CPU with AMX in a process Linux refused the tile state (an old kernel, a small sigaltstack).
constexpr GemmFeatures kAmxRefused{.avx512 = true, .avx512_bf16 = true, .amx_bf16 = true};
constexpr GemmFeatures kEveryCpu[] = {kAvx2Only, kAvx512, kAvx512Bf16, kAmx, kAmxRefused};

using K = Bf16Kernel;
using F = F32Kernel;

void ExpectChoice(const char* forced, GemmFeatures cpu, F32Kernel f32, Bf16Kernel bf16) {
  const absl::StatusOr<GemmChoice> c = ChooseGemm(forced, cpu);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->f32, f32);
  EXPECT_EQ(c->bf16, bf16);
}

TEST(GemmChoice, UnsetTakesTheWidestTheCpuRuns) {
  for (const char* unset : {static_cast<const char*>(nullptr), ""}) {
    // Without AVX-512, kiln's AVX2 kernel, not Eigen's.
    ExpectChoice(unset, kAvx2Only, F::kKilnAvx2, K::kWidenToF32);
    ExpectChoice(unset, kAvx512, F::kKilnAvx512, K::kWidenToF32);
    ExpectChoice(unset, kAvx512Bf16, F::kKilnAvx512, K::kAvx512Bf16);
    ExpectChoice(unset, kAmx, F::kKilnAvx512, K::kAmx);
    // Refused AMX: the next kernel, silently (AmxPermission() says why).
    ExpectChoice(unset, kAmxRefused, F::kKilnAvx512, K::kAvx512Bf16);
  }
}

TEST(GemmChoice, EachValueForcesItsKernels) {
  for (GemmFeatures cpu : kEveryCpu) ExpectChoice("kiln-avx2", cpu, F::kKilnAvx2, K::kWidenToF32);
  // Eigen's AVX2 GEMM, the peer kiln's AVX2 kernel replaced, only when asked for.
  for (GemmFeatures cpu : kEveryCpu) ExpectChoice("avx2", cpu, F::kEigenAvx2, K::kWidenToF32);
  // avx512 keeps bf16 on the f32 path (HalfInF32), as before the bf16 kernels existed.
  for (GemmFeatures cpu : {kAvx512, kAvx512Bf16, kAmx, kAmxRefused}) {
    ExpectChoice("avx512", cpu, F::kKilnAvx512, K::kWidenToF32);
  }
  for (GemmFeatures cpu : {kAvx512Bf16, kAmx, kAmxRefused}) {
    ExpectChoice("avx512bf16", cpu, F::kKilnAvx512, K::kAvx512Bf16);
  }
  ExpectChoice("amx", kAmx, F::kKilnAvx512, K::kAmx);
}

TEST(GemmChoice, AKernelTheCpuLacksOrAnUnknownValueIsAnError) {
  EXPECT_EQ(
      ChooseGemm("avx512", kAvx2Only).status().message(),
      "KILN_CPU_GEMM=avx512: expected kiln-avx2, avx2, avx512, avx512bf16 or amx (this CPU lacks AVX-512 F/DQ/VL/BW)");
  for (GemmFeatures cpu : {kAvx2Only, kAvx512}) {
    EXPECT_EQ(
        ChooseGemm("avx512bf16", cpu).status().message(),
        "KILN_CPU_GEMM=avx512bf16: expected kiln-avx2, avx2, avx512, avx512bf16 or amx (this CPU lacks AVX-512 BF16)");
  }
  for (GemmFeatures cpu : {kAvx2Only, kAvx512, kAvx512Bf16}) {
    EXPECT_EQ(ChooseGemm("amx", cpu).status().message(),
              "KILN_CPU_GEMM=amx: expected kiln-avx2, avx2, avx512, avx512bf16 or amx (this CPU lacks AMX-BF16)");
  }
  EXPECT_EQ(
      ChooseGemm("amx", kAmxRefused).status().message(),
      "KILN_CPU_GEMM=amx: expected kiln-avx2, avx2, avx512, avx512bf16 or amx (Linux refused this process AMX tile "
      "data: see AmxPermission())");
  EXPECT_EQ(ChooseGemm("AVX512BF16", kAmx).status().message(),
            "KILN_CPU_GEMM=AVX512BF16: expected kiln-avx2, avx2, avx512, avx512bf16 or amx");
  EXPECT_EQ(ChooseGemm("AMX", kAmx).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChooseGemm("sse2", kAmx).status().code(), absl::StatusCode::kInvalidArgument);
}

// Asked to, where CPUID has AMX, DetectGemmFeatures asks Linux for the tile state once and
// reports what it said; where it lacks AMX, nothing is asked and AmxPermission() says so. Not
// asked to, it never reports AMX as permitted (gemm_amx_permission_test checks it asks nothing).
TEST(GemmChoice, DetectionAgreesWithAmxPermission) {
  EXPECT_FALSE(DetectGemmFeatures(false).amx_permitted);
  const GemmFeatures cpu = DetectGemmFeatures(true);
  EXPECT_EQ(cpu.amx_permitted, cpu.amx_bf16 && AmxPermission().ok()) << AmxPermission();
  if (!cpu.amx_bf16) {
    EXPECT_FALSE(cpu.amx_permitted);
  }
  if (!AmxPermission().ok()) std::printf("AMX not used: %s\n", std::string(AmxPermission().message()).c_str());
}

// kiln reads AMX from CPUID and XCR0 itself (clang 14 has no name for it); GCC's builtin, which
// builds this test, is the reference on every CPU.
TEST(GemmChoice, DetectionMatchesTheCompilersCpuFeatures) {
  const GemmFeatures cpu = DetectGemmFeatures(false);
  EXPECT_EQ(cpu.amx_bf16, cpu.avx512_bf16 && __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16"));
}

}  // namespace
}  // namespace kiln::cpu
