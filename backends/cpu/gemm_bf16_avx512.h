// The bf16 GEMM kernel for CPUs with AVX-512 BF16: vdpbf16ps multiplies pairs of bf16 along k
// and adds them into f32 lanes, so B is packed in k-pair-interleaved panels, A's pairs are
// broadcast, and a 12 x 32 block of C lives in 24 zmm registers. Built with its own ISA flags
// (BUILD.bazel); gemm.cc calls it only when CPUID says the CPU runs it. Sapphire Rapids issues
// vdpbf16ps once per 2 cycles, half the f32 FMA rate, so there it only ties the f32 GEMM at
// large shapes (bench/README.md); it wins where the f32 path's casts weigh.
//
// Numerics. A product of two bf16 values is exact in f32 (8-bit significands), so each output
// is a plain f32 sum of exact products, rounded once to bf16 (the same round-to-nearest-even,
// NaN and infinity rules as tensor/half.h). Where it differs from widening to f32 and running
// the f32 GEMM: vdpbf16ps treats denormal inputs as zero and flushes denormal results (a sum
// under 2^-126 in magnitude becomes 0), and it adds the two products of a pair in a fixed order
// (the odd k first, each addition rounded), unlike the f32 GEMM's FMA order; the error stays
// within the usual bound of a k-term f32 sum. Every element is summed over k in the same order
// whatever the row split or the thread count, so results are bit-identical across them.
#ifndef KILN_BACKENDS_CPU_GEMM_BF16_AVX512_H_
#define KILN_BACKENDS_CPU_GEMM_BF16_AVX512_H_

#include <cstdint>

#include "backends/cpu/gemm.h"

namespace kiln::cpu::avx512bf16 {

// Register block of C (rows x columns), and cache blocks: a kKC x kNC block of packed B
// (256 KiB) sits in L2, a kKC x kNR panel of it (16 KiB) in L1 while kMC rows of A go past.
// kKC is even, so a k pair never straddles two blocks.
inline constexpr int64_t kMR = 12, kNR = 32;
inline constexpr int64_t kKC = 256, kMC = 192, kNC = 512;
// Rows whose f32 partial sums (kept across k blocks) one pass holds.
inline constexpr int64_t kMO = 1024;

// Caller-owned buffers (64-byte aligned) of at least these many elements: packed A and B
// (bf16 pairs as uint32), and the f32 partial sums (needed only when k > kKC).
inline constexpr int64_t kPackedA = kMC * kKC / 2, kPackedB = kKC / 2 * kNC, kPartials = kMO * kNC;
struct Scratch {
  uint32_t* a;
  uint32_t* b;
  float* partials;
};

// Rows [r0, r0 + rows) of C = A B, as GemmBlock (gemm.h) with bf16 bits; C's rows are ldc apart.
void GemmBlockBf16(const uint16_t* a, MatrixLayout la, const uint16_t* b, MatrixLayout lb, uint16_t* c, int64_t ldc,
                   int64_t r0, int64_t rows, int64_t k, int64_t n, const Scratch& scratch);

}  // namespace kiln::cpu::avx512bf16

#endif  // KILN_BACKENDS_CPU_GEMM_BF16_AVX512_H_
