// The GEMM kernel the CPU backend picked (gemm.h) against a plain triple loop, in both operand
// layouts; the BUILD file runs it once as the machine chooses and once forced to AVX2, and checks
// that a bad KILN_CPU_GEMM stops with a message.
#include "backends/cpu/gemm.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace kiln::cpu {
namespace {

TEST(Gemm, TheKernelIsTheEnvironmentsOrTheWidestTheCpuRuns) {
  const char* forced = std::getenv("KILN_CPU_GEMM");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  // avx512bf16 names the bf16 kernel; f32 runs the AVX-512 build beside it.
  const std::string want = forced == nullptr                     ? (avx512 ? "avx512" : "kiln-avx2")
                           : std::string(forced) == "avx512bf16" ? "avx512"
                                                                 : forced;
  EXPECT_EQ(std::string(GemmKernel()), want);
}

template <class T>
void ExpectMatchesLoops(bool a_row_major, bool b_row_major) {
  const int64_t m = 37, k = 53, n = 29;  // past every register block, with tails
  std::mt19937 gen(3);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> a(m * k), b(k * n), c(m * n, T(-7));
  for (T& v : a) v = T(u(gen));
  for (T& v : b) v = T(u(gen));
  const auto at = [&](int64_t i, int64_t p) { return a_row_major ? a[i * k + p] : a[p * m + i]; };
  const auto bt = [&](int64_t p, int64_t j) { return b_row_major ? b[p * n + j] : b[j * k + p]; };
  const MatrixLayout la{a_row_major, a_row_major ? k : m}, lb{b_row_major, b_row_major ? n : k};
  GemmBlock(a.data(), la, b.data(), lb, c.data(), 0, 20, k, n);  // two blocks of rows
  GemmBlock(a.data(), la, b.data(), lb, c.data(), 20, m - 20, k, n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += double(at(i, p)) * double(bt(p, j));
      EXPECT_NEAR(c[i * n + j], want, (sizeof(T) == 4 ? 1e-5 : 1e-13) * k) << i << "," << j;
    }
  }
}

TEST(Gemm, MatchesLoopsInEveryLayout) {
  for (bool ra : {true, false}) {
    for (bool rb : {true, false}) {
      SCOPED_TRACE(std::string(ra ? "A row-major" : "A column-major") + (rb ? ", B row-major" : ", B column-major"));
      ExpectMatchesLoops<float>(ra, rb);
      ExpectMatchesLoops<double>(ra, rb);
    }
  }
}

TEST(GemmBadEnvironment, StopsWithAMessage) {
  const MatrixLayout l{true, 1};
  float x = 1, y = 1, z = 0;
  EXPECT_EXIT(GemmBlock(&x, l, &y, l, &z, 0, 1, 1, 1), ::testing::ExitedWithCode(2),
              "KILN_CPU_GEMM=sse2: expected kiln-avx2, avx2, avx512, avx512bf16 or amx");
}

}  // namespace
}  // namespace kiln::cpu
