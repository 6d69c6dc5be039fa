// Linux's AMX permission is asked for by the first bf16 matmul, never by f32 or f64 ones: once
// granted, Linux refuses every later sigaltstack() too small for the tile state, which would
// break a program (or a library in it) that never runs bf16. Its own binary, so nothing in the
// process has asked before the test starts.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "backends/cpu/gemm.h"
#include "backends/cpu/gemm_choice.h"
#include "tensor/half.h"

namespace kiln::cpu {
namespace {

// Whether Linux has granted this process the AMX tile data (ARCH_GET_XCOMP_PERM, asm/prctl.h).
bool TileDataGranted() {
  constexpr int kArchGetXcompPerm = 0x1022, kXfeatureXtileData = 18;
  uint64_t features = 0;
  EXPECT_EQ(syscall(SYS_arch_prctl, kArchGetXcompPerm, &features), 0);
  return (features >> kXfeatureXtileData) & 1;
}

template <class T>
void Matmul() {
  const int64_t n = 64;
  std::vector<T> a(n * n, T(1.0f)), b(n * n, T(0.5f)), c(n * n);
  const MatrixLayout l{true, n};
  GemmBlock(a.data(), l, b.data(), l, c.data(), 0, n, n, n);
  EXPECT_EQ(float(c[0]), 32.0f);
}

TEST(AmxPermission, OnlyTheFirstBf16MatmulAsksLinux) {
  if (!DetectGemmFeatures(false).amx_bf16) GTEST_SKIP() << "this CPU lacks AMX-BF16: there is nothing to ask";
  if (std::getenv("KILN_CPU_GEMM") != nullptr) GTEST_SKIP() << "KILN_CPU_GEMM is set: it decides what is asked";
  ASSERT_FALSE(TileDataGranted()) << "the tile state was granted before the test started";
  Matmul<float>();
  Matmul<double>();
  EXPECT_STREQ(GemmKernel(), "avx512");
  EXPECT_FALSE(TileDataGranted()) << "an f32 or f64 matmul asked Linux for the AMX tile state";
  if (NativeBf16Gemm()) Matmul<BFloat16>();
  EXPECT_EQ(TileDataGranted(), AmxPermission().ok()) << AmxPermission();
}

}  // namespace
}  // namespace kiln::cpu
