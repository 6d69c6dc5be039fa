// The AVX-512 BF16 GEMM (gemm_bf16_avx512.h). Only intrinsics and functions of this file's
// anonymous namespace: an inline function or template shared with other files (std's, say)
// would be compiled here with AVX-512 and could be the copy the linker keeps for everyone.
// On CPUs with AMX, gemm_bf16_amx.cc comes first where Linux grants the tile state; this
// kernel is the fallback there (KILN_CPU_GEMM=avx512bf16 forces it).
#include "backends/cpu/gemm_bf16_avx512.h"

#include <immintrin.h>

namespace kiln::cpu::avx512bf16 {
namespace {

#include "backends/cpu/gemm_bf16_helpers.inc"

// One panel of packed A or B: `lanes` rows of A (or columns of B), `width` (kMR or kNR) apart,
// over kc values of k: pair p of lane l at out[p * width + l], from the elements (2p, l) and
// (2p + 1, l) at x + k * ks + l * ls. Lanes past `lanes` and the odd k's partner are zero.
void PackPanel(const uint16_t* x, int64_t ks, int64_t ls, int64_t kc, int64_t lanes, int64_t width, uint32_t* out) {
  const int64_t kcp = (kc + 1) / 2;
  if (ls != 1) {
    // k is contiguous along each lane (row-major A, a W^T view of B): 16 pairs of 16 lanes are
    // 16 masked loads and a transpose. A gather per pair took half the packing time, which was
    // a fifth of a 1024^3 product's (perf, Zen 5); this is +17-32% where packing weighs.
    for (int64_t p0 = 0; p0 < kcp; p0 += 16) {
      const __mmask32 k_in = FirstLanes32(kc - 2 * p0);
      const int64_t pairs = Min(16, kcp - p0);
      for (int64_t l = 0; l < width; l += 16) {
        const __mmask16 in_panel = FirstLanes16(width - l);
        __m512i words[16];
        for (int64_t i = 0; i < 16; ++i) {
          words[i] = l + i < lanes ? _mm512_maskz_loadu_epi16(k_in, x + 2 * p0 + (l + i) * ls) : _mm512_setzero_si512();
        }
        Transpose16x16(words);
        for (int64_t p = 0; p < pairs; ++p) _mm512_mask_storeu_epi32(out + (p0 + p) * width + l, in_panel, words[p]);
      }
    }
    return;
  }
  // Otherwise the lanes are contiguous (MatrixLayout has one unit stride): along each pair of
  // k, two vector loads, widened and interleaved (a masked-off element is not read).
  for (int64_t p = 0; p < kcp; ++p) {
    const bool odd = 2 * p + 1 < kc;
    const uint16_t* even_k = x + 2 * p * ks;
    for (int64_t l = 0; l < width; l += 16) {
      const __mmask16 m = FirstLanes16(lanes - l), in_panel = FirstLanes16(width - l);
      const __m256i lo = _mm256_maskz_loadu_epi16(m, even_k + l);
      const __m256i hi = _mm256_maskz_loadu_epi16(odd ? m : __mmask16(0), (odd ? even_k + ks : even_k) + l);
      const __m512i v = _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
      _mm512_mask_storeu_epi32(out + p * width + l, in_panel, v);
    }
  }
}

// Rows [i0, i0 + mc) x k [p0, p0 + kc) of A as kMR-row panels, panel q at ap + q * kcp * kMR.
void PackA(const uint16_t* a, MatrixLayout la, int64_t i0, int64_t mc, int64_t p0, int64_t kc, uint32_t* ap) {
  const int64_t kcp = (kc + 1) / 2;
  const int64_t rs = la.row_major ? la.ld : 1, ks = la.row_major ? 1 : la.ld;
  for (int64_t ir = 0; ir < mc; ir += kMR) {
    PackPanel(a + (i0 + ir) * rs + p0 * ks, ks, rs, kc, Min(kMR, mc - ir), kMR, ap + ir * kcp);
  }
}

// k [p0, p0 + kc) x columns [j0, j0 + nc) of B as kNR-column panels, panel q at bp + q * kcp * kNR.
void PackB(const uint16_t* b, MatrixLayout lb, int64_t p0, int64_t kc, int64_t j0, int64_t nc, uint32_t* bp) {
  const int64_t kcp = (kc + 1) / 2;
  const int64_t ks = lb.row_major ? lb.ld : 1, cs = lb.row_major ? 1 : lb.ld;
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    PackPanel(b + p0 * ks + (j0 + jr) * cs, ks, cs, kc, Min(kNR, nc - jr), kNR, bp + jr * kcp);
  }
}

__m512bh AsBf16Pairs(__m512i v) { return reinterpret_cast<__m512bh>(v); }

// R rows x kNR columns of C over kcp k pairs. The sums start from zero (first k block) or from
// `partials`, and end in `partials` (f32, exact) or, after the last k block, in C, rounded.
template <int R>
void Micro(const uint32_t* ap, const uint32_t* bp, int64_t kcp, bool first, bool last, float* partials, uint16_t* c,
           int64_t ldc, int64_t nr) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) {
    for (int h = 0; h < 2; ++h) {
      acc[r][h] = first ? _mm512_setzero_ps() : _mm512_load_ps(partials + r * kNC + 16 * h);
    }
  }
  for (int64_t p = 0; p < kcp; ++p) {
    const __m512bh b0 = AsBf16Pairs(_mm512_load_si512(bp + p * kNR));
    const __m512bh b1 = AsBf16Pairs(_mm512_load_si512(bp + p * kNR + 16));
    for (int r = 0; r < R; ++r) {
      const __m512bh a = AsBf16Pairs(_mm512_set1_epi32(static_cast<int>(ap[p * kMR + r])));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
    }
  }
  if (!last) {
    for (int r = 0; r < R; ++r) {
      for (int h = 0; h < 2; ++h) _mm512_store_ps(partials + r * kNC + 16 * h, acc[r][h]);
    }
    return;
  }
  const __mmask32 cols = nr >= 32 ? ~__mmask32(0) : (__mmask32(1) << nr) - 1;
  for (int r = 0; r < R; ++r) {
    for (int h = 0; h < 2; ++h) {
      _mm256_mask_storeu_epi16(c + r * ldc + 16 * h, __mmask16(cols >> (16 * h)), ToBf16(acc[r][h]));
    }
  }
}

using MicroKernel = void (*)(const uint32_t*, const uint32_t*, int64_t, bool, bool, float*, uint16_t*, int64_t,
                             int64_t);
// By the number of rows, 1 .. kMR.
constexpr MicroKernel kMicro[kMR] = {Micro<1>, Micro<2>, Micro<3>, Micro<4>,  Micro<5>,  Micro<6>,
                                     Micro<7>, Micro<8>, Micro<9>, Micro<10>, Micro<11>, Micro<12>};

}  // namespace

void GemmBlockBf16(const uint16_t* a, MatrixLayout la, const uint16_t* b, MatrixLayout lb, uint16_t* c, int64_t ldc,
                   int64_t r0, int64_t rows, int64_t k, int64_t n, const Scratch& scratch) {
  // k blocks of nearly equal even length (the last may be odd: its lone k is padded).
  const int64_t blocks = (k + kKC - 1) / kKC;
  const int64_t block_k = ((k + blocks - 1) / blocks + 1) / 2 * 2;
  // With one k block nothing is kept between blocks (and `partials` may be null).
  float* const partials = blocks > 1 ? scratch.partials : nullptr;
  for (int64_t i0 = r0; i0 < r0 + rows; i0 += kMO) {
    const int64_t mo = Min(kMO, r0 + rows - i0);
    for (int64_t jc = 0; jc < n; jc += kNC) {
      const int64_t nc = Min(kNC, n - jc);
      for (int64_t pc = 0; pc < k; pc += block_k) {
        const int64_t kc = Min(block_k, k - pc), kcp = (kc + 1) / 2;
        const bool first = pc == 0, last = pc + kc == k;
        PackB(b, lb, pc, kc, jc, nc, scratch.b);
        for (int64_t ic = i0; ic < i0 + mo; ic += kMC) {
          const int64_t mc = Min(kMC, i0 + mo - ic);
          PackA(a, la, ic, mc, pc, kc, scratch.a);
          for (int64_t jr = 0; jr < nc; jr += kNR) {
            for (int64_t ir = 0; ir < mc; ir += kMR) {
              float* const part = partials ? partials + (ic - i0 + ir) * kNC + jr : nullptr;
              kMicro[Min(kMR, mc - ir) - 1](scratch.a + ir * kcp, scratch.b + jr * kcp, kcp, first, last, part,
                                            c + (ic + ir) * ldc + jc + jr, ldc, Min(kNR, nc - jr));
            }
          }
        }
      }
    }
  }
}

}  // namespace kiln::cpu::avx512bf16
