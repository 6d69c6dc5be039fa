// What kiln's f32 GEMM kernels (gemm_f32_avx512.h, gemm_f32_avx2.h) share: the caller-owned
// buffers they pack A and B into, and the size of packed B for their cache blocks. Only
// constexpr arithmetic and a plain struct, so it is safe to include in files built with
// different ISA flags.
#ifndef KILN_BACKENDS_CPU_GEMM_F32_BLOCKING_H_
#define KILN_BACKENDS_CPU_GEMM_F32_BLOCKING_H_

#include <cstdint>

namespace kiln::cpu {

// Packing buffers, 64-byte aligned: `a` holds the kernel's kPackedA elements, `b` its
// PackedB(k, n).
struct F32GemmScratch {
  float* a;
  float* b;
};

// Elements of packed B for a product of depth k and width n: one kc x nc block of nr-wide panels.
constexpr int64_t PackedBElements(int64_t k, int64_t n, int64_t block_k, int64_t block_n, int64_t nr) {
  const int64_t kc = k < block_k ? k : block_k, nc = n < block_n ? n : block_n;
  return kc * ((nc + nr - 1) / nr * nr);
}

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_GEMM_F32_BLOCKING_H_
