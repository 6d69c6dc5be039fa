// kiln's own f32 GEMM for AVX2 + FMA, the same design as the AVX-512 one (gemm_f32_avx512.h) at
// half the vector width: B packed into kKC x kNR panels and A into kMR-row panels from either
// layout, a kMR x kNR block of C in ymm accumulators, C written directly (no zero-fill first) or
// added to. gemm.cc calls it for f32 on CPUs without AVX-512 (KILN_CPU_GEMM=avx2 takes Eigen's
// AVX2 GEMM instead): on a Zen 3 it runs the GPT's and the MLP's products at about Eigen's speed
// or faster (bench:gemm_bench compares the two), and the default GPT's step 1.2x faster.
//
// Numerics, as the AVX-512 kernel's: each element of C is one chain of FMAs over k in increasing
// order, started from 0 (or from C when accumulating), so a result is bit-identical whatever the
// row split or thread count.
#ifndef KILN_BACKENDS_CPU_GEMM_F32_AVX2_H_
#define KILN_BACKENDS_CPU_GEMM_F32_AVX2_H_

#include <cstdint>

#include "backends/cpu/gemm.h"
#include "backends/cpu/gemm_f32_blocking.h"

namespace kiln::cpu::avx2f32 {

// Register block: 6 rows x 16 columns = 12 ymm accumulators, 2 for B's row and 1 for A's
// broadcast (15 of 16). Cache blocks (BLIS's order): a kKC x kNR micro-panel of packed B (16 KiB)
// stays in L1 while the kMC x kKC block of packed A (144 KiB) streams past it from L2; the
// kKC x kNC block of packed B (2 MiB) sits in L3.
inline constexpr int64_t kMR = 6, kNR = 16;
inline constexpr int64_t kKC = 256, kMC = 144, kNC = 2048;

// Elements of the packing buffers (F32GemmScratch) for a product of depth k and width n.
inline constexpr int64_t kPackedA = kMC * kKC;
constexpr int64_t PackedB(int64_t k, int64_t n) { return PackedBElements(k, n, kKC, kNC, kNR); }
using Scratch = F32GemmScratch;

// C (m x n, rows ldc apart) = A B, or C += A B when `accumulate`; A is m x k, B is k x n.
void Gemm(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t ldc, int64_t m, int64_t k,
          int64_t n, bool accumulate, const Scratch& scratch);

}  // namespace kiln::cpu::avx2f32

#endif  // KILN_BACKENDS_CPU_GEMM_F32_AVX2_H_
