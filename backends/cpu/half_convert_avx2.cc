// The AVX2 path of backends/cpu/half_convert_paths.h: f16 through F16C, f32 -> bf16 in AVX2
// integer code (GCC's vectorisation of the scalar loop is 4x slower in L1), bf16 -> f32 as the
// scalar loop (a shift, which GCC vectorises well). Its functions carry their own target
// attribute, as the build's baseline (AVX2+FMA) does not include F16C: nothing here runs before
// the dispatcher has seen AVX2 and F16C in CPUID, and no inline function elsewhere is built
// with F16C.
#include <cstring>

#include "backends/cpu/half_convert_paths.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace kiln::cpu::half_convert {
namespace {

#if defined(__x86_64__)

#define KILN_AVX2_F16C __attribute__((target("avx2,f16c")))

// vcvtph2ps is exact for every f16 but one class: it quiets a signalling NaN (sets the top
// mantissa bit), where F16ToFloat keeps the payload as it is. Those lanes get the bit cleared.
KILN_AVX2_F16C void F16ToF32x8(const Float16* in, float* out) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
  const __m256 wide = _mm256_cvtph_ps(h);
  const __m256i magnitude = _mm256_and_si256(_mm256_cvtepu16_epi32(h), _mm256_set1_epi32(0x7fff));
  const __m256i signalling = _mm256_and_si256(_mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7c00)),
                                              _mm256_cmpgt_epi32(_mm256_set1_epi32(0x7e00), magnitude));
  const __m256 quiet_bit = _mm256_castsi256_ps(_mm256_and_si256(signalling, _mm256_set1_epi32(0x400000)));
  _mm256_storeu_ps(out, _mm256_xor_ps(wide, quiet_bit));
}

// vcvtps2ph with an immediate round-to-nearest-even (MXCSR's mode is not used) gives what
// FloatToF16 gives for all 2^32 inputs, NaNs included (tests/backends/cpu/half_convert_test.cc).
KILN_AVX2_F16C void F32ToF16x8(const float* in, Float16* out) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT));
}

// FloatToBf16 on 8 lanes, each left in the low half of its 32 bits. A NaN lane adds nothing
// (truncates) and gets the quiet bit, which is FloatToBf16's (x >> 16) | 0x40.
KILN_AVX2_F16C __m256i F32ToBf16Bits(const float* in) {
  const __m256 f = _mm256_loadu_ps(in);
  const __m256i x = _mm256_castps_si256(f);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i round = _mm256_andnot_si256(nan, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  const __m256i quiet = _mm256_or_si256(x, _mm256_and_si256(nan, _mm256_set1_epi32(0x400000)));
  return _mm256_srli_epi32(_mm256_add_epi32(quiet, round), 16);
}

KILN_AVX2_F16C void F32ToBf16x16(const float* in, BFloat16* out) {
  // packus works within 128-bit lanes: [a0-3 b0-3 a4-7 b4-7]; the permute puts a before b.
  const __m256i packed = _mm256_packus_epi32(F32ToBf16Bits(in), F32ToBf16Bits(in + 8));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute4x64_epi64(packed, 0b11011000));
}

// kLanes at a time; the last few go through a zero-padded block so that they take the same
// instructions.
template <class From, class To, int kLanes, void (*kConvert)(const From*, To*)>
KILN_AVX2_F16C void Convert(const From* in, To* out, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) kConvert(in + i, out + i);
  if (i == n) return;
  From block[kLanes] = {};
  To converted[kLanes];
  std::memcpy(block, in + i, (n - i) * sizeof(From));
  kConvert(block, converted);
  std::memcpy(out + i, converted, (n - i) * sizeof(To));
}

#undef KILN_AVX2_F16C

constexpr auto F16ToF32 = Convert<Float16, float, 8, F16ToF32x8>;
constexpr auto F32ToF16 = Convert<float, Float16, 8, F32ToF16x8>;
constexpr auto F32ToBf16 = Convert<float, BFloat16, 16, F32ToBf16x16>;

// F16C from CPUID leaf 1 (clang 14, which builds the fuzzers, has no "f16c" for
// __builtin_cpu_supports); "avx2" there includes the OS's YMM state, which F16C also needs.
bool Supported() {
  unsigned a, b, c, d;
  return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

#else  // not x86-64: never chosen

bool Supported() { return false; }
void F16ToF32(const Float16* in, float* out, int64_t n) { Scalar().f16_to_f32(in, out, n); }
void F32ToF16(const float* in, Float16* out, int64_t n) { Scalar().f32_to_f16(in, out, n); }
void F32ToBf16(const float* in, BFloat16* out, int64_t n) { Scalar().f32_to_bf16(in, out, n); }

#endif

}  // namespace

const HalfConvertPath& Avx2() {
  static const HalfConvertPath path{
      .name = "avx2",
      .supported = Supported,
      .bf16_to_f32 = Scalar().bf16_to_f32,
      .f32_to_bf16 = F32ToBf16,
      .f16_to_f32 = F16ToF32,
      .f32_to_f16 = F32ToF16,
  };
  return path;
}

}  // namespace kiln::cpu::half_convert
