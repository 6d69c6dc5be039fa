#include "backends/cpu/gemm.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln::cpu {

#define DECLARE_KERNEL(NS)                                                                                     \
  namespace NS {                                                                                               \
  void GemmBlockF32(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t r0,    \
                    int64_t rows, int64_t k, int64_t n);                                                       \
  void GemmBlockF64(const double* a, MatrixLayout la, const double* b, MatrixLayout lb, double* c, int64_t r0, \
                    int64_t rows, int64_t k, int64_t n);                                                       \
  }
DECLARE_KERNEL(avx2)
DECLARE_KERNEL(avx512)
#undef DECLARE_KERNEL

namespace {

bool HasAvx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}

// Decided once: the environment's choice, else the widest the CPU runs.
bool UseAvx512() {
  static const bool use = [] {
    const char* forced = std::getenv("KILN_CPU_GEMM");
    if (forced == nullptr || *forced == '\0') return HasAvx512();
    if (std::strcmp(forced, "avx2") == 0) return false;
    if (std::strcmp(forced, "avx512") == 0 && HasAvx512()) return true;
    // Before any tensor exists there is no error path to return through: say so and stop.
    std::fprintf(stderr, "KILN_CPU_GEMM=%s: expected avx2 or avx512%s\n", forced,
                 std::strcmp(forced, "avx512") == 0 ? " (this CPU lacks AVX-512 F/DQ/VL/BW)" : "");
    std::exit(2);
  }();
  return use;
}

}  // namespace

void GemmBlock(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t r0, int64_t rows,
               int64_t k, int64_t n) {
  (UseAvx512() ? avx512::GemmBlockF32 : avx2::GemmBlockF32)(a, la, b, lb, c, r0, rows, k, n);
}

void GemmBlock(const double* a, MatrixLayout la, const double* b, MatrixLayout lb, double* c, int64_t r0, int64_t rows,
               int64_t k, int64_t n) {
  (UseAvx512() ? avx512::GemmBlockF64 : avx2::GemmBlockF64)(a, la, b, lb, c, r0, rows, k, n);
}

const char* GemmKernel() { return UseAvx512() ? "avx512" : "avx2"; }

}  // namespace kiln::cpu
