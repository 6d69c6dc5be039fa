// One thread's GEMM block for the CPU backend's matmul, with the widest kernel the machine
// runs, chosen once at start-up from CPUID, so one binary uses either: kiln's own f32 kernel for
// AVX2+FMA (the build's baseline; gemm_f32_avx2.h) and Eigen's f64 GEMM built for it, or on
// AVX-512 CPUs (the x86-64-v4 set: F, DQ, VL, BW) kiln's AVX-512 f32 kernel (gemm_f32_avx512.h)
// and Eigen's f64 GEMM built for AVX-512;
// bf16 has its own kernels: AMX tiles where the CPU has AMX-BF16 and Linux grants the tile state
// (gemm_bf16_amx.h), else vdpbf16ps on CPUs with AVX-512 BF16 (gemm_bf16_avx512.h).
// KILN_CPU_GEMM=kiln-avx2, avx2 (Eigen's AVX2 f32 GEMM), avx512, avx512bf16 or amx forces a
// choice (gemm_choice.h);
// asking for one the CPU lacks is an error.
#ifndef KILN_BACKENDS_CPU_GEMM_H_
#define KILN_BACKENDS_CPU_GEMM_H_

#include <cstdint>

namespace kiln {
struct BFloat16;
}  // namespace kiln

namespace kiln::cpu {

// How the last two dims of an operand lie in memory.
struct MatrixLayout {
  bool row_major;
  int64_t ld;  // elements between rows (row-major) or columns (column-major)
};

// Rows [r0, r0 + rows) of C = A B for one batch; A is m x k, B is k x n, C row-major m x n.
void GemmBlock(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t r0, int64_t rows,
               int64_t k, int64_t n);
void GemmBlock(const double* a, MatrixLayout la, const double* b, MatrixLayout lb, double* c, int64_t r0, int64_t rows,
               int64_t k, int64_t n);

// C = A B (or C += A B when `accumulate`) on this thread, A m x k, B k x n, C row-major with its
// rows ldc apart (a block of a wider matrix).
void Gemm(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t ldc, int64_t m, int64_t k,
          int64_t n, bool accumulate);
void Gemm(const double* a, MatrixLayout la, const double* b, MatrixLayout lb, double* c, int64_t ldc, int64_t m,
          int64_t k, int64_t n, bool accumulate);

// bf16 through AMX or vdpbf16ps, accumulating in f32 and rounding once; only where NativeBf16Gemm().
void GemmBlock(const BFloat16* a, MatrixLayout la, const BFloat16* b, MatrixLayout lb, BFloat16* c, int64_t r0,
               int64_t rows, int64_t k, int64_t n);

// Rows [r0, r0 + rows) x columns [c0, c0 + cols) of the same C: the bf16 kernels also split by
// columns (each call packs only its columns of B). The result does not depend on the split.
void GemmBlock(const BFloat16* a, MatrixLayout la, const BFloat16* b, MatrixLayout lb, BFloat16* c, int64_t r0,
               int64_t rows, int64_t k, int64_t n, int64_t c0, int64_t cols);

// The kernel in use for f32 and f64: "avx512" (kiln's f32 kernel, Eigen's f64), "kiln-avx2"
// (kiln's AVX2 f32 kernel, Eigen's f64) or "avx2" (Eigen's for both).
const char* GemmKernel();

// Whether bf16 matmuls run the bf16 kernel; if not, they widen to f32 (tensor/half_in_f32.h).
bool NativeBf16Gemm();
// The kernel bf16 matmuls use: "amx", "avx512bf16", or "f32" (widened, then GemmKernel()'s).
const char* Bf16GemmKernel();

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_GEMM_H_
