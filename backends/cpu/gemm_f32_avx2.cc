// kiln's f32 GEMM for AVX2 + FMA (gemm_f32_avx2.h). As in gemm_f32_avx512.cc, only intrinsics and
// functions of this file's anonymous namespace, so no inline function shared with other files is
// compiled here with this file's ISA flags.
#include "backends/cpu/gemm_f32_avx2.h"

#include <immintrin.h>

namespace kiln::cpu::avx2f32 {
namespace {

int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// A mask of the first `n` of 8 lanes (none for n <= 0), for maskload/maskstore, from a table.
__m256i FirstLanes(int64_t n) {
  static constexpr int32_t kOnesThenZeros[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  const int64_t count = n >= 8 ? 8 : n <= 0 ? 0 : n;
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnesThenZeros + 8 - count));
}

// The first `n` floats at p (the rest zero), and their store: full vectors take the plain
// instructions, which are cheaper than the masked ones on every AVX2 CPU.
__m256 LoadFirst(const float* p, int64_t n) {
  return n >= 8 ? _mm256_loadu_ps(p) : n <= 0 ? _mm256_setzero_ps() : _mm256_maskload_ps(p, FirstLanes(n));
}
void StoreFirst(float* p, int64_t n, __m256 v) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
  } else if (n > 0) {
    _mm256_maskstore_ps(p, FirstLanes(n), v);
  }
}

// Transposes 8 rows of 8 floats in place: element j of row i becomes element i of row j.
void Transpose8x8(__m256 r[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // Each 128-bit lane of s[j] (j < 4) holds element j (or j + 4) of rows 0-3; s[4 + j] of rows 4-7.
  for (int h = 0; h < 2; ++h) {
    s[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    s[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xee);
    s[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    s[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xee);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x31);
  }
}

// Panels of `width` (kMR or kNR) lanes over kc values of k, from `lanes` rows of A (or columns
// of B): k index p of lane q * width + l lands at out[q * width * kc + p * width + l], read from
// x[p * ks + (q * width + l) * ls]. Lanes past `lanes` are zero, so the micro-kernel needs no
// row or column tests inside its loop.
void PackPanels(const float* x, int64_t ks, int64_t ls, int64_t kc, int64_t lanes, int64_t width, float* out) {
  if (ls == 1) {
    // Lanes contiguous (column-major A, row-major B): along each k, one pass over all panels,
    // so the source is read row by row (panel by panel would stride over pages).
    // A panel narrower than a vector (kMR = 6) takes a whole vector's store all the same but the
    // last k's: the 2 floats past it land on the next k's slots, written after this one.
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t q0 = 0; q0 < lanes; q0 += width) {
        for (int64_t l = 0; l < width; l += 8) {
          const __m256 v = LoadFirst(x + p * ks + q0 + l, lanes - q0 - l);
          StoreFirst(out + q0 * kc + p * width + l, p + 1 < kc ? 8 : width - l, v);
        }
      }
    }
    return;
  }
  // k contiguous along each lane (column-major B): 8 x 8 blocks, transposed.
  for (int64_t q0 = 0; q0 < lanes; q0 += width) {
    for (int64_t p0 = 0; p0 < kc; p0 += 8) {
      const int64_t depth = Min(8, kc - p0);
      for (int64_t l = 0; l < width; l += 8) {
        __m256 rows[8];
        for (int64_t i = 0; i < 8; ++i) {
          const int64_t lane = q0 + l + i;
          rows[i] = l + i < width && lane < lanes ? LoadFirst(x + p0 + lane * ls, depth) : _mm256_setzero_ps();
        }
        Transpose8x8(rows);
        for (int64_t p = 0; p < depth; ++p) StoreFirst(out + q0 * kc + (p0 + p) * width + l, width - l, rows[p]);
      }
    }
  }
}

// The rows of the next panel of A when `left` rows remain: kMR, but 7 and 8 split 4 + 3 and 4 + 4,
// since a panel of 1 or 2 rows does too few FMAs per load of B to keep the FMA units busy.
int64_t PanelRows(int64_t left) { return left == 7 || left == 8 ? 4 : Min(kMR, left); }

// Rows [i0, i0 + mc) x k [p0, p0 + kc) of A as panels of PanelRows rows, the panel of row ir at
// ap + ir * kKC. Column-major A is packed k-major (k index p of the panel's row r at p * rows + r);
// row-major A keeps its rows (at r * kKC + p), a plain copy. The micro-kernel reads either
// (kRowPanel).
void PackA(const float* a, MatrixLayout la, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* ap) {
  if (!la.row_major) {
    for (int64_t ir = 0, rows; ir < mc; ir += rows) {
      rows = PanelRows(mc - ir);
      PackPanels(a + i0 + ir + p0 * la.ld, la.ld, 1, kc, rows, rows, ap + ir * kKC);
    }
    return;
  }
  for (int64_t i = 0; i < mc; ++i) {
    const float* row = a + (i0 + i) * la.ld + p0;
    for (int64_t p = 0; p < kc; p += 8) StoreFirst(ap + i * kKC + p, kc - p, LoadFirst(row + p, kc - p));
  }
}

// k [p0, p0 + kc) x columns [j0, j0 + nc) of B as kNR-column panels, panel q at bp + q * kNR * kc.
void PackB(const float* b, MatrixLayout lb, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* bp) {
  const int64_t ks = lb.row_major ? lb.ld : 1, cs = lb.row_major ? 1 : lb.ld;
  PackPanels(b + p0 * ks + j0 * cs, ks, cs, kc, nc, kNR, bp);
}

// R rows x kNR columns of C over kc values of k, continuing from C (load_c) or from 0. Only
// plain loads and stores, so the 12 accumulators live in registers throughout (with masked ones
// for narrow tiles GCC kept them on the stack and zeroed them there: ~100 instructions a call).
// `next` is the C tile the following call works on: fetched now, its loads will not wait.
template <int R, bool kRowPanel>
void Micro(const float* ap, const float* bp, int64_t kc, float* c, int64_t ldc, bool load_c, const float* next) {
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(next + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(next + r * ldc + 15), _MM_HINT_T0);
  }
  __m256 lo[R], hi[R];  // columns 0-7 and 8-15 of each row
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    lo[r] = load_c ? _mm256_loadu_ps(c + r * ldc) : _mm256_setzero_ps();
    hi[r] = load_c ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_setzero_ps();
  }
  // A's element is read as a value, not through _mm256_broadcast_ss's pointer: a float pointer may
  // alias the accumulators (__m256 may alias anything), which made GCC store them every step.
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(bp + p * kNR), b1 = _mm256_load_ps(bp + p * kNR + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_set1_ps(kRowPanel ? ap[r * kKC + p] : ap[p * R + r]);
      lo[r] = _mm256_fmadd_ps(a, b0, lo[r]);
      hi[r] = _mm256_fmadd_ps(a, b1, hi[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(c + r * ldc, lo[r]);
    _mm256_storeu_ps(c + r * ldc + 8, hi[r]);
  }
}

using MicroKernel = void (*)(const float*, const float*, int64_t, float*, int64_t, bool, const float*);
// By A's panel layout (rows kept or k-major), then the number of rows, 1 .. kMR.
template <bool kRowPanel>
constexpr MicroKernel kMicro[kMR] = {Micro<1, kRowPanel>, Micro<2, kRowPanel>, Micro<3, kRowPanel>,
                                     Micro<4, kRowPanel>, Micro<5, kRowPanel>, Micro<6, kRowPanel>};

// A tile of `rows` x nr (< kNR) columns: the kernel runs on a full-width copy on the stack (C's
// values, when it continues from them), and the first nr columns go back. The same FMA chains as
// a full tile's.
void NarrowTile(MicroKernel micro, const float* ap, const float* bp, int64_t kc, float* c, int64_t ldc, int64_t rows,
                int64_t nr, bool load_c) {
  alignas(32) float tile[kMR * kNR];
  if (load_c) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < kNR; j += 8) _mm256_store_ps(tile + r * kNR + j, LoadFirst(c + r * ldc + j, nr - j));
    }
  }
  micro(ap, bp, kc, tile, kNR, load_c, tile);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < nr; j += 8) StoreFirst(c + r * ldc + j, nr - j, _mm256_load_ps(tile + r * kNR + j));
  }
}

// With k == 0 the product is zero.
void ZeroRows(float* c, int64_t ldc, int64_t m, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; j += 8) StoreFirst(c + i * ldc + j, n - j, _mm256_setzero_ps());
  }
}

}  // namespace

void Gemm(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t ldc, int64_t m, int64_t k,
          int64_t n, bool accumulate, const Scratch& scratch) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate) ZeroRows(c, ldc, m, n);
    return;
  }
  // k blocks of nearly equal length, so the last is not a sliver.
  const int64_t blocks = (k + kKC - 1) / kKC, block_k = (k + blocks - 1) / blocks;
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = Min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += block_k) {
      const int64_t kc = Min(block_k, k - pc);
      const bool load_c = accumulate || pc > 0;
      PackB(b, lb, pc, kc, jc, nc, scratch.b);
      for (int64_t ic = 0; ic < m; ic += kMC) {
        const int64_t mc = Min(kMC, m - ic);
        PackA(a, la, ic, mc, pc, kc, scratch.a);
        // B's micro-panel (kc x kNR, 16 KiB at most) stays in L1 while A's micro-panels, from the
        // packed block in L2, pass it: per k step that reads kMR floats from L2, not kNR.
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          for (int64_t ir = 0, rows; ir < mc; ir += rows) {
            rows = PanelRows(mc - ir);
            float* const tile = c + (ic + ir) * ldc + jc + jr;
            // The next tile: below this one, else the top of the next columns.
            const float* next = ir + rows < mc ? tile + rows * ldc : jr + kNR < nc ? tile - ir * ldc + kNR : tile;
            const MicroKernel micro = (la.row_major ? kMicro<true> : kMicro<false>)[rows - 1];
            if (jr + kNR <= nc) {
              micro(scratch.a + ir * kKC, scratch.b + jr * kc, kc, tile, ldc, load_c, next);
            } else {
              NarrowTile(micro, scratch.a + ir * kKC, scratch.b + jr * kc, kc, tile, ldc, rows, nc - jr, load_c);
            }
          }
        }
      }
    }
  }
}

}  // namespace kiln::cpu::avx2f32
