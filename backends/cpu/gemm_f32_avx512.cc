// kiln's f32 GEMM for AVX-512 (gemm_f32_avx512.h). Only intrinsics and functions of this file's
// anonymous namespace: an inline function or template shared with other files (std's, say)
// would be compiled here with AVX-512 and could be the copy the linker keeps for everyone.
#include "backends/cpu/gemm_f32_avx512.h"

#include <immintrin.h>

// GCC 12's AVX-512 intrinsics start from `__m512 __Y = __Y;`, which -W(maybe-)uninitialized
// reports at every use once they are inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kiln::cpu::avx512f32 {
namespace {

int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// A mask of the first `n` of 16 lanes (none for n <= 0).
__mmask16 FirstLanes(int64_t n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// Transposes 16 rows of 16 floats in place: element j of row i becomes element i of row j.
void Transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  // Each 128-bit lane now holds a transposed 4 x 4 block; two rounds of lane shuffles place them.
  for (int i = 0; i < 2; ++i) {
    for (int c = 0; c < 4; ++c) {
      t[8 * i + c] = _mm512_shuffle_f32x4(r[8 * i + c], r[8 * i + 4 + c], 0x88);
      t[8 * i + 4 + c] = _mm512_shuffle_f32x4(r[8 * i + c], r[8 * i + 4 + c], 0xdd);
    }
  }
  for (int c = 0; c < 8; ++c) {
    r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
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
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t q0 = 0; q0 < lanes; q0 += width) {
        for (int64_t l = 0; l < width; l += 16) {
          const __m512 v = _mm512_maskz_loadu_ps(FirstLanes(lanes - q0 - l), x + p * ks + q0 + l);
          _mm512_mask_storeu_ps(out + q0 * kc + p * width + l, FirstLanes(width - l), v);
        }
      }
    }
    return;
  }
  // k contiguous along each lane (column-major B): 16 x 16 blocks, transposed.
  for (int64_t q0 = 0; q0 < lanes; q0 += width) {
    for (int64_t p0 = 0; p0 < kc; p0 += 16) {
      const __mmask16 k_in = FirstLanes(kc - p0);
      const int64_t depth = Min(16, kc - p0);
      for (int64_t l = 0; l < width; l += 16) {
        __m512 rows[16];
        for (int64_t i = 0; i < 16; ++i) {
          const int64_t lane = q0 + l + i;
          rows[i] =
              l + i < width && lane < lanes ? _mm512_maskz_loadu_ps(k_in, x + p0 + lane * ls) : _mm512_setzero_ps();
        }
        Transpose16x16(rows);
        const __mmask16 in_panel = FirstLanes(width - l);
        for (int64_t p = 0; p < depth; ++p)
          _mm512_mask_storeu_ps(out + q0 * kc + (p0 + p) * width + l, in_panel, rows[p]);
      }
    }
  }
}

// Rows [i0, i0 + mc) x k [p0, p0 + kc) of A as kMR-row panels, panel q at ap + q * kMR * kKC.
// Column-major A is packed k-major (k index p of row r at p * kMR + r); row-major A keeps its rows
// (at r * kKC + p), a plain copy: a transpose per k would cost up to a fifth of a narrow product
// (n = 64). The micro-kernel reads either (kRowPanel).
void PackA(const float* a, MatrixLayout la, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* ap) {
  if (!la.row_major) {
    for (int64_t ir = 0; ir < mc; ir += kMR) {
      PackPanels(a + i0 + ir + p0 * la.ld, la.ld, 1, kc, Min(kMR, mc - ir), kMR, ap + ir * kKC);
    }
    return;
  }
  for (int64_t i = 0; i < mc; ++i) {
    const float* row = a + (i0 + i) * la.ld + p0;
    for (int64_t p = 0; p < kc; p += 16) {
      const __mmask16 in = FirstLanes(kc - p);
      _mm512_mask_storeu_ps(ap + i * kKC + p, in, _mm512_maskz_loadu_ps(in, row + p));
    }
  }
}

// k [p0, p0 + kc) x columns [j0, j0 + nc) of B as kNR-column panels, panel q at bp + q * kNR * kc.
void PackB(const float* b, MatrixLayout lb, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* bp) {
  const int64_t ks = lb.row_major ? lb.ld : 1, cs = lb.row_major ? 1 : lb.ld;
  PackPanels(b + p0 * ks + j0 * cs, ks, cs, kc, nc, kNR, bp);
}

// R rows x nr (<= kNR) columns of C over kc values of k, continuing from C (load_c) or from 0.
// `next` is the C tile the following call works on: fetched now, its loads will not wait.
template <int R, bool kRowPanel>
void Micro(const float* ap, const float* bp, int64_t kc, float* c, int64_t ldc, int64_t nr, bool load_c,
           const float* next) {
  constexpr int kV = kNR / 16;  // zmm per row
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < kV; ++v) _mm_prefetch(reinterpret_cast<const char*>(next + r * ldc + 16 * v), _MM_HINT_T0);
  }
  __mmask16 cols[kV];
  for (int v = 0; v < kV; ++v) cols[v] = FirstLanes(nr - 16 * v);
  __m512 acc[R][kV];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < kV; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  if (load_c) {
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < kV; ++v) acc[r][v] = _mm512_maskz_loadu_ps(cols[v], c + r * ldc + 16 * v);
    }
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    __m512 b[kV];
    for (int v = 0; v < kV; ++v) b[v] = _mm512_load_ps(bp + p * kNR + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(kRowPanel ? ap[r * kKC + p] : ap[p * kMR + r]);
      for (int v = 0; v < kV; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < kV; ++v) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, cols[v], acc[r][v]);
  }
}

using MicroKernel = void (*)(const float*, const float*, int64_t, float*, int64_t, int64_t, bool, const float*);
// By A's panel layout (rows kept or k-major), then the number of rows, 1 .. kMR.
template <bool kRowPanel>
constexpr MicroKernel kMicro[kMR] = {
    Micro<1, kRowPanel>,  Micro<2, kRowPanel>,  Micro<3, kRowPanel>,  Micro<4, kRowPanel>, Micro<5, kRowPanel>,
    Micro<6, kRowPanel>,  Micro<7, kRowPanel>,  Micro<8, kRowPanel>,  Micro<9, kRowPanel>, Micro<10, kRowPanel>,
    Micro<11, kRowPanel>, Micro<12, kRowPanel>, Micro<13, kRowPanel>, Micro<14, kRowPanel>};

// With k == 0 the product is zero.
void ZeroRows(float* c, int64_t ldc, int64_t m, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; j += 16) _mm512_mask_storeu_ps(c + i * ldc + j, FirstLanes(n - j), _mm512_setzero_ps());
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
        for (int64_t ir = 0; ir < mc; ir += kMR) {
          float* const c_rows = c + (ic + ir) * ldc + jc;
          for (int64_t jr = 0; jr < nc; jr += kNR) {
            // The next tile: along these rows, else the next rows' first.
            const float* next = jr + kNR < nc ? c_rows + jr + kNR : ir + kMR < mc ? c_rows + kMR * ldc : c_rows;
            const MicroKernel micro = (la.row_major ? kMicro<true> : kMicro<false>)[Min(kMR, mc - ir) - 1];
            micro(scratch.a + ir * kKC, scratch.b + jr * kc, kc, c_rows + jr, ldc, Min(kNR, nc - jr), load_c, next);
          }
        }
      }
    }
  }
}

}  // namespace kiln::cpu::avx512f32
