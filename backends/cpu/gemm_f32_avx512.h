// kiln's own f32 GEMM for AVX-512 (BLIS-style): B is packed into kKC x kNR panels and A into
// kMR x kKC panels from either layout (row- or column-major, any leading dimension), so every
// layout pair runs the same micro-kernel: a kMR x kNR block of C in zmm accumulators, A's
// elements broadcast, B's rows loaded as vectors. C is row-major with its own leading dimension
// and is written directly (no zero-fill first) or added to. Built with its own ISA flags
// (BUILD.bazel); gemm.cc calls it only where the AVX-512 f32 kernel is chosen.
//
// Numerics. Each element of C is one chain of FMAs over k in increasing order, started from 0
// (or from C's value when accumulating); a chain cut by k blocks resumes from the f32 value it
// stored, which is the register's value exactly. Nothing depends on where the element sits in
// a tile, so a result is bit-identical whatever the row (or column) split or thread count.
#ifndef KILN_BACKENDS_CPU_GEMM_F32_AVX512_H_
#define KILN_BACKENDS_CPU_GEMM_F32_AVX512_H_

#include <cstdint>

#include "backends/cpu/gemm.h"
#include "backends/cpu/gemm_f32_blocking.h"

namespace kiln::cpu::avx512f32 {

// Register block of C (rows x columns: kMR x kNR / 16 zmm accumulators), and cache blocks: a
// kMR x kKC panel of packed A (21 KiB) stays in L1 while the kKC x kNC block of packed B
// (1.2 MiB, in L2) goes past it; kMC rows of A are packed at a time. Measured on a Xeon with
// AVX-512 (48 KiB L1, 2 MiB L2): kKC 384 over 256 +5%, 128 -15%; kMR 12 and 14 alike.
inline constexpr int64_t kMR = 14, kNR = 32;
inline constexpr int64_t kKC = 384, kMC = 196, kNC = 768;

// Elements of the packing buffers (F32GemmScratch) for a product of depth k and width n.
inline constexpr int64_t kPackedA = kMC * kKC;
constexpr int64_t PackedB(int64_t k, int64_t n) { return PackedBElements(k, n, kKC, kNC, kNR); }
using Scratch = F32GemmScratch;

// C (m x n, rows ldc apart) = A B, or C += A B when `accumulate`; A is m x k, B is k x n.
void Gemm(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t ldc, int64_t m, int64_t k,
          int64_t n, bool accumulate, const Scratch& scratch);

}  // namespace kiln::cpu::avx512f32

#endif  // KILN_BACKENDS_CPU_GEMM_F32_AVX512_H_
