// The AMX-BF16 GEMM (gemm_bf16_amx.h). Only intrinsics and functions of this file's anonymous
// namespace: an inline function or template shared with other files (std's, say) would be
// compiled here with AVX-512 and AMX and could be the copy the linker keeps for everyone.
#include "backends/cpu/gemm_bf16_amx.h"

#include <immintrin.h>

namespace kiln::cpu::amx {
namespace {

#include "backends/cpu/gemm_bf16_helpers.inc"

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// GCC's tile loads are asm without a memory operand: nothing tells the compiler they read the
// packed buffers, so barriers on both sides of each packer keep its stores after the tile
// loads of the previous block and before those of the next.
void CompilerBarrier() { asm volatile("" ::: "memory"); }

// LDTILECFG's 64 bytes: palette 1, every tile 16 rows of 64 bytes (16 f32 or 32 bf16).
struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
constexpr TileConfig kTileConfig = {
    .palette_id = 1,
    .start_row = 0,
    .reserved = {},
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

// Two rows of 16 bf16 (k even, k odd) as 16 pairs, the even k in the low half.
__m512i Interleave(__m256i even, __m256i odd) {
  return _mm512_or_si512(_mm512_cvtepu16_epi32(even), _mm512_slli_epi32(_mm512_cvtepu16_epi32(odd), 16));
}

// Packed A: kMC x kKC at most, in panels of 16 rows (kc padded with zeros to kcp, a multiple
// of 32; rows past mc zero); panel q at ap + q * 16 * kcp, its tile g (k [32g, 32g + 32)) a
// contiguous 16 x 32 block at + g * 512, as TILELOADD reads it with a 64-byte stride.
void PackA(const uint16_t* a, MatrixLayout la, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int64_t kcp,
           uint16_t* ap) {
  const int64_t rs = la.row_major ? la.ld : 1, ks = la.row_major ? 1 : la.ld;
  const __m512i row_words = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32(kTileK / 2));
  for (int64_t q = 0; q * kTileRows < mc; ++q) {
    const int64_t row0 = q * kTileRows, rows = Min(kTileRows, mc - row0);
    for (int64_t g = 0; g * kTileK < kcp; ++g) {
      uint16_t* tile = ap + q * kTileRows * kcp + g * kTileRows * kTileK;
      const int64_t kk = g * kTileK;
      if (ks == 1) {
        // k is contiguous: each row of the tile is one masked load.
        const __mmask32 m = FirstLanes32(kc - kk);
        for (int64_t r = 0; r < kTileRows; ++r) {
          const __m512i v =
              r < rows ? _mm512_maskz_loadu_epi16(m, a + (i0 + row0 + r) * rs + p0 + kk) : _mm512_setzero_si512();
          _mm512_store_si512(tile + r * kTileK, v);
        }
      } else {
        // Rows are contiguous: a k pair of 16 rows is two loads, interleaved, then scattered
        // down the tile's column of that pair.
        const __mmask16 m = FirstLanes16(rows);
        for (int64_t p = 0; p < kTileK / 2; ++p) {
          const int64_t even = kk + 2 * p;
          const uint16_t* x = a + (p0 + even) * ks + i0 + row0;
          const __m256i lo = _mm256_maskz_loadu_epi16(even < kc ? m : __mmask16(0), x);
          const __m256i hi = _mm256_maskz_loadu_epi16(even + 1 < kc ? m : __mmask16(0), even + 1 < kc ? x + ks : x);
          _mm512_i32scatter_epi32(reinterpret_cast<uint32_t*>(tile) + p, row_words, Interleave(lo, hi), 4);
        }
      }
    }
  }
}

// Packed B: kKC x kNC at most, in panels of 16 columns (kc padded with zeros to kcp; columns
// past nc zero); panel q at bp + q * 16 * kcp, its tile g 16 k pairs x 16 columns at
// + g * 512: pair p of column l the 32-bit word p * 16 + l, the even k in the low half.
void PackB(const uint16_t* b, MatrixLayout lb, int64_t p0, int64_t kc, int64_t kcp, int64_t j0, int64_t nc,
           uint16_t* bp) {
  const auto panel = [&](int64_t q) { return reinterpret_cast<uint32_t*>(bp + q * kTileCols * kcp); };
  const int64_t panels = (nc + kTileCols - 1) / kTileCols;
  if (lb.row_major) {
    // Columns are contiguous: along each pair of rows of B, in memory order, two loads and an
    // interleave per panel.
    for (int64_t p = 0; p < kcp / 2; ++p) {
      const int64_t even = 2 * p;
      const uint16_t* x = b + (p0 + even) * lb.ld + j0;
      const bool odd = even + 1 < kc;
      for (int64_t q = 0; q < panels; ++q) {
        __m512i v = _mm512_setzero_si512();
        if (even < kc) {
          const __mmask16 m = FirstLanes16(nc - q * kTileCols);
          const __m256i lo = _mm256_maskz_loadu_epi16(m, x + q * kTileCols);
          const __m256i hi = _mm256_maskz_loadu_epi16(odd ? m : __mmask16(0), (odd ? x + lb.ld : x) + q * kTileCols);
          v = Interleave(lo, hi);
        }
        _mm512_store_si512(panel(q) + p * kTileCols, v);
      }
    }
    return;
  }
  // k is contiguous: a k tile of one column (16 pairs) is one masked load (k past kc reads as
  // zero, the lone last k's partner too), and a transpose turns 16 columns into the tile's rows.
  for (int64_t q = 0; q < panels; ++q) {
    const int64_t col0 = j0 + q * kTileCols, cols = Min(kTileCols, nc - q * kTileCols);
    for (int64_t kk = 0; kk < kcp; kk += kTileK) {
      const __mmask32 m = FirstLanes32(kc - kk);
      __m512i words[16];
      for (int64_t l = 0; l < 16; ++l) {
        words[l] = l < cols ? _mm512_maskz_loadu_epi16(m, b + p0 + kk + (col0 + l) * lb.ld) : _mm512_setzero_si512();
      }
      Transpose16x16(words);
      uint32_t* tile = panel(q) + kk / 2 * kTileCols;
      for (int64_t p = 0; p < 16; ++p) _mm512_store_si512(tile + p * kTileCols, words[p]);
    }
  }
}

// A 16 x 16 f32 tile, stored by the caller to `tile`, rounded into `rows` x `cols` of C.
void StoreRounded(const float* tile, uint16_t* c, int64_t ldc, int64_t rows, int64_t cols) {
  const __mmask16 m = FirstLanes16(cols);
  for (int64_t r = 0; r < Min(rows, kTileRows); ++r) {
    _mm256_mask_storeu_epi16(c + r * ldc, m, ToBf16(_mm512_load_ps(tile + r * kTileCols)));
  }
}

// MT x NT tiles of C (rows x cols of it valid) over kcp values of k: tiles 0, 1 (row 0) and 2,
// 3 (row 1) of C; 4, 5 of A (panels ap, ap + panel); 6, 7 of B (bp, bp + panel). The sums
// start from zero (first k block) or from `partials` (row stride kNC), and end in `partials`
// or, after the last k block, in C, rounded. Tile numbers are literals in GCC's intrinsics.
template <int MT, int NT>
void Micro(const uint16_t* ap, const uint16_t* bp, int64_t kcp, bool first, bool last, float* partials, uint16_t* c,
           int64_t ldc, int64_t rows, int64_t cols) {
  constexpr int64_t kPartialStride = kNC * sizeof(float), kTileStride = 64;
  const int64_t panel = kTileRows * kcp;  // between two panels of A, or of B
  // Tile (row, col)'s partial sums; `partials` is null with a single k block.
  const auto part = [partials](int64_t row, int64_t col) { return partials + row * kTileRows * kNC + col * kTileCols; };
  if (first) {
    _tile_zero(0);
    if constexpr (NT == 2) _tile_zero(1);
    if constexpr (MT == 2) _tile_zero(2);
    if constexpr (MT == 2 && NT == 2) _tile_zero(3);
  } else {
    _tile_loadd(0, part(0, 0), kPartialStride);
    if constexpr (NT == 2) _tile_loadd(1, part(0, 1), kPartialStride);
    if constexpr (MT == 2) _tile_loadd(2, part(1, 0), kPartialStride);
    if constexpr (MT == 2 && NT == 2) _tile_loadd(3, part(1, 1), kPartialStride);
  }
  for (int64_t g = 0; g < kcp; g += kTileK) {
    const int64_t at = g * kTileRows;  // tile g of a panel
    _tile_loadd(4, ap + at, kTileStride);
    _tile_loadd(6, bp + at, kTileStride);
    if constexpr (NT == 2) _tile_loadd(7, bp + panel + at, kTileStride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NT == 2) _tile_dpbf16ps(1, 4, 7);
    if constexpr (MT == 2) {
      _tile_loadd(5, ap + panel + at, kTileStride);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (NT == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  if (!last) {
    _tile_stored(0, part(0, 0), kPartialStride);
    if constexpr (NT == 2) _tile_stored(1, part(0, 1), kPartialStride);
    if constexpr (MT == 2) _tile_stored(2, part(1, 0), kPartialStride);
    if constexpr (MT == 2 && NT == 2) _tile_stored(3, part(1, 1), kPartialStride);
    return;
  }
  alignas(64) float tile[kTileRows * kTileCols];
  _tile_stored(0, tile, kTileStride);
  StoreRounded(tile, c, ldc, rows, cols);
  if constexpr (NT == 2) {
    _tile_stored(1, tile, kTileStride);
    StoreRounded(tile, c + kTileCols, ldc, rows, cols - kTileCols);
  }
  if constexpr (MT == 2) {
    _tile_stored(2, tile, kTileStride);
    StoreRounded(tile, c + kTileRows * ldc, ldc, rows - kTileRows, cols);
  }
  if constexpr (MT == 2 && NT == 2) {
    _tile_stored(3, tile, kTileStride);
    StoreRounded(tile, c + kTileRows * ldc + kTileCols, ldc, rows - kTileRows, cols - kTileCols);
  }
}

using MicroKernel = void (*)(const uint16_t*, const uint16_t*, int64_t, bool, bool, float*, uint16_t*, int64_t, int64_t,
                             int64_t);
// By the number of row tiles and column tiles, 1 or 2 each.
constexpr MicroKernel kMicro[2][2] = {{Micro<1, 1>, Micro<1, 2>}, {Micro<2, 1>, Micro<2, 2>}};

}  // namespace

void GemmBlockBf16(const uint16_t* a, MatrixLayout la, const uint16_t* b, MatrixLayout lb, uint16_t* c, int64_t ldc,
                   int64_t r0, int64_t rows, int64_t k, int64_t n, const Scratch& scratch) {
  CompilerBarrier();
  _tile_loadconfig(&kTileConfig);
  // k blocks of nearly equal length (the last one's tail padded with zeros to a whole tile).
  const int64_t blocks = (k + kKC - 1) / kKC;
  const int64_t block_k = RoundUp((k + blocks - 1) / blocks, kTileK);
  // With one k block nothing is kept between blocks (and `partials` may be null).
  float* const partials = blocks > 1 ? scratch.partials : nullptr;
  for (int64_t i0 = r0; i0 < r0 + rows; i0 += kMO) {
    const int64_t mo = Min(kMO, r0 + rows - i0);
    for (int64_t jc = 0; jc < n; jc += kNC) {
      const int64_t nc = Min(kNC, n - jc);
      for (int64_t pc = 0; pc < k; pc += block_k) {
        const int64_t kc = Min(block_k, k - pc), kcp = RoundUp(kc, kTileK);
        const bool first = pc == 0, last = pc + kc == k;
        CompilerBarrier();
        PackB(b, lb, pc, kc, kcp, jc, nc, scratch.b);
        for (int64_t ic = i0; ic < i0 + mo; ic += kMC) {
          const int64_t mc = Min(kMC, i0 + mo - ic);
          CompilerBarrier();
          PackA(a, la, ic, mc, pc, kc, kcp, scratch.a);
          CompilerBarrier();
          // One 32-row panel of A stays in L1 while the block's panels of B come from L2 (measured
          // ~8% faster than the other order).
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const int64_t mr = Min(kMR, mc - ir);
            for (int64_t jr = 0; jr < nc; jr += kNR) {
              const int64_t cols = Min(kNR, nc - jr);
              float* const part = partials ? partials + (ic - i0 + ir) * kNC + jr : nullptr;
              kMicro[mr > kTileRows][cols > kTileCols](scratch.a + ir * kcp, scratch.b + jr * kcp, kcp, first, last,
                                                       part, c + (ic + ir) * ldc + jc + jr, ldc, mr, cols);
            }
          }
        }
      }
    }
  }
  _tile_release();
}

}  // namespace kiln::cpu::amx
