// KILN_CPU_GEMM's values against every kind of CPU (backends/cpu/gemm_choice.h), so what a CPU
// without AVX-512 or without AVX-512 BF16 would do is checked on any machine.
#include "backends/cpu/gemm_choice.h"

#include <gtest/gtest.h>

namespace kiln::cpu {
namespace {

constexpr GemmFeatures kAvx2Only{}, kAvx512{.avx512 = true}, kAvx512Bf16{.avx512 = true, .avx512_bf16 = true};

void ExpectChoice(const char* forced, GemmFeatures cpu, bool avx512, bool native_bf16) {
  const absl::StatusOr<GemmChoice> c = ChooseGemm(forced, cpu);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->avx512, avx512);
  EXPECT_EQ(c->native_bf16, native_bf16);
}

TEST(GemmChoice, UnsetTakesTheWidestTheCpuRuns) {
  for (const char* unset : {static_cast<const char*>(nullptr), ""}) {
    ExpectChoice(unset, kAvx2Only, false, false);
    ExpectChoice(unset, kAvx512, true, false);
    ExpectChoice(unset, kAvx512Bf16, true, true);
  }
}

TEST(GemmChoice, EachValueForcesItsKernels) {
  for (GemmFeatures cpu : {kAvx2Only, kAvx512, kAvx512Bf16}) ExpectChoice("avx2", cpu, false, false);
  // avx512 keeps bf16 on the f32 path (HalfInF32), as before the bf16 kernel existed.
  ExpectChoice("avx512", kAvx512, true, false);
  ExpectChoice("avx512", kAvx512Bf16, true, false);
  ExpectChoice("avx512bf16", kAvx512Bf16, true, true);
}

TEST(GemmChoice, AKernelTheCpuLacksOrAnUnknownValueIsAnError) {
  EXPECT_EQ(ChooseGemm("avx512", kAvx2Only).status().message(),
            "KILN_CPU_GEMM=avx512: expected avx2, avx512 or avx512bf16 (this CPU lacks AVX-512 F/DQ/VL/BW)");
  for (GemmFeatures cpu : {kAvx2Only, kAvx512}) {
    EXPECT_EQ(ChooseGemm("avx512bf16", cpu).status().message(),
              "KILN_CPU_GEMM=avx512bf16: expected avx2, avx512 or avx512bf16 (this CPU lacks AVX-512 BF16)");
  }
  EXPECT_EQ(ChooseGemm("AVX512BF16", kAvx512Bf16).status().message(),
            "KILN_CPU_GEMM=AVX512BF16: expected avx2, avx512 or avx512bf16");
  EXPECT_EQ(ChooseGemm("sse2", kAvx512Bf16).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::cpu
