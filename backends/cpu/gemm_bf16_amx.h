// The bf16 GEMM kernel for CPUs with AMX (Sapphire Rapids and later): TDPBF16PS multiplies a
// 16 x 32 bf16 tile of A by a 32 x 16 tile of B, held as 16 k pairs x 16 columns (the pair
// interleaving vdpbf16ps also wants), into a 16 x 16 f32 tile of C. A 32 x 32 block of C lives
// in four of the eight tile registers, the other four take two tiles of A and two of B.
// Built with its own ISA flags (BUILD.bazel); gemm.cc calls it only when CPUID has AMX and
// Linux has granted the tile state (AmxPermission(), gemm_choice.h).
//
// Tile configuration. Each call loads its own (LDTILECFG: all eight tiles 16 rows x 64
// bytes) and releases the tiles when done (TILERELEASE): no per-thread state, any thread may
// call it, and between calls the tile state is back at its init value, which Linux need not
// save on a context switch. Both together cost about 50 ns here; a 1 x 1 x 1 call, ~130 ns.
//
// Numerics. Products of bf16 values are exact in f32; each output is an f32 sum of them,
// rounded once to bf16 (the round-to-nearest-even, NaN and infinity rules of tensor/half.h).
// TDPBF16PS treats denormal inputs as zero and flushes denormal results, like vdpbf16ps, but
// its order of additions within a tile is the hardware's own (not vdpbf16ps's, nor a plain
// sequential sum: measured), so results can differ from the AVX-512 BF16 kernel's by an ulp;
// the error stays within the bound of a k-term f32 sum. Tiles run over k in the same order
// whatever the row split or the thread count, so results are bit-identical across them.
#ifndef KILN_BACKENDS_CPU_GEMM_BF16_AMX_H_
#define KILN_BACKENDS_CPU_GEMM_BF16_AMX_H_

#include <cstdint>

#include "backends/cpu/gemm.h"

namespace kiln::cpu::amx {

// Tiles: 16 rows of C per tile, 16 columns, 32 values of k (16 pairs). Register block: 2 x 2
// tiles of C. Cache blocks: a kKC x kNC block of packed B (512 KiB) in L2, kMC x kKC of packed
// A, whose 32-row panels (32 KiB) sit in L1 in turn. Other sizes measured within noise.
inline constexpr int64_t kTileRows = 16, kTileCols = 16, kTileK = 32;
inline constexpr int64_t kMR = 2 * kTileRows, kNR = 2 * kTileCols;
inline constexpr int64_t kKC = 512, kMC = 256, kNC = 512;
// Rows whose f32 partial sums (kept across k blocks) one pass holds; a multiple of kMR.
inline constexpr int64_t kMO = 1024;

// Caller-owned buffers (64-byte aligned) of at least these many elements: packed A and B
// (bf16 as uint16), and the f32 partial sums (needed only when k > kKC; rows rounded up to
// kMR, at most kMO).
inline constexpr int64_t kPackedA = kMC * kKC, kPackedB = kKC * kNC;
struct Scratch {
  uint16_t* a;
  uint16_t* b;
  float* partials;
};

// Rows [r0, r0 + rows) of C = A B, as GemmBlock (gemm.h) with bf16 bits; C's rows are ldc apart.
void GemmBlockBf16(const uint16_t* a, MatrixLayout la, const uint16_t* b, MatrixLayout lb, uint16_t* c, int64_t ldc,
                   int64_t r0, int64_t rows, int64_t k, int64_t n, const Scratch& scratch);

}  // namespace kiln::cpu::amx

#endif  // KILN_BACKENDS_CPU_GEMM_BF16_AMX_H_
