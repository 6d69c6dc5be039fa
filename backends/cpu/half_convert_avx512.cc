// The AVX-512 path of backends/cpu/half_convert_paths.h: the AVX2 path's arithmetic on 16 lanes
// of a zmm register, and the last partial vector through masked loads and stores rather than a
// padded copy. f32 -> bf16 stays integer code: vcvtneps2bf16 (AVX-512 BF16) flushes denormal
// inputs to zero, which FloatToBf16 does not. The functions carry their own target attribute, as
// the build's baseline is AVX2; the dispatcher calls them only where CPUID shows AVX-512 F, BW
// and VL.
#include "backends/cpu/half_convert_paths.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12's AVX-512 headers leave undefined vectors on purpose (`__m512 __Y = __Y;`), which
// warns once inlined here (as gemm_avx512's copts say).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kiln::cpu::half_convert {
namespace {

#if defined(__x86_64__)

#define KILN_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

constexpr int64_t kLanes = 16;

KILN_AVX512 __mmask16 Mask(int64_t n) { return n >= kLanes ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

KILN_AVX512 void Bf16ToF32(const BFloat16* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = Mask(n - i);
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, in + i));
    _mm512_mask_storeu_ps(out + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
  }
}

// FloatToBf16: add 0x7fff plus the kept part's lowest bit and truncate; a NaN adds nothing and
// gets the quiet bit, (x >> 16) | 0x40.
KILN_AVX512 void F32ToBf16(const float* in, BFloat16* out, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = Mask(n - i);
    const __m512 f = _mm512_maskz_loadu_ps(m, in + i);
    const __m512i x = _mm512_castps_si512(f);
    const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    const __m512i bits = _mm512_mask_or_epi32(rounded, nan, x, _mm512_set1_epi32(0x400000));
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(_mm512_srli_epi32(bits, 16)));
  }
}

// vcvtph2ps quiets a signalling NaN, which F16ToFloat does not: those lanes get the bit cleared.
KILN_AVX512 void F16ToF32(const Float16* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = Mask(n - i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, in + i);
    const __m512i magnitude = _mm512_and_si512(_mm512_cvtepu16_epi32(h), _mm512_set1_epi32(0x7fff));
    const __mmask16 signalling = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7c00)) &
                                 _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(0x7e00), magnitude);
    const __m512i wide = _mm512_castps_si512(_mm512_cvtph_ps(h));
    const __m512i fixed = _mm512_mask_xor_epi32(wide, signalling, wide, _mm512_set1_epi32(0x400000));
    _mm512_mask_storeu_ps(out + i, m, _mm512_castsi512_ps(fixed));
  }
}

// vcvtps2ph with an immediate round-to-nearest-even, as the AVX2 path.
KILN_AVX512 void F32ToF16(const float* in, Float16* out, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    const __mmask16 m = Mask(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_mask_storeu_epi16(out + i, m, h);
  }
}

#undef KILN_AVX512

bool Supported() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

#else  // not x86-64: never chosen

bool Supported() { return false; }
void Bf16ToF32(const BFloat16* in, float* out, int64_t n) { Scalar().bf16_to_f32(in, out, n); }
void F32ToBf16(const float* in, BFloat16* out, int64_t n) { Scalar().f32_to_bf16(in, out, n); }
void F16ToF32(const Float16* in, float* out, int64_t n) { Scalar().f16_to_f32(in, out, n); }
void F32ToF16(const float* in, Float16* out, int64_t n) { Scalar().f32_to_f16(in, out, n); }

#endif

}  // namespace

const HalfConvertPath& Avx512() {
  static const HalfConvertPath path{
      .name = "avx512",
      .supported = Supported,
      .bf16_to_f32 = Bf16ToF32,
      .f32_to_bf16 = F32ToBf16,
      .f16_to_f32 = F16ToF32,
      .f32_to_f16 = F32ToF16,
  };
  return path;
}

}  // namespace kiln::cpu::half_convert
