// The F16C path of backends/cpu/half_convert_paths.h. Its functions carry their own target
// attribute, as the build's baseline (AVX2+FMA) does not include F16C: nothing here runs before
// the dispatcher has seen F16C in CPUID, and no inline function elsewhere is built with it.
#include <algorithm>
#include <cstring>

#include "backends/cpu/half_convert_paths.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln::cpu::half_convert {
namespace {

#if defined(__x86_64__)

#define KILN_F16C __attribute__((target("avx2,f16c")))

// vcvtph2ps is exact for every f16 but one class: it quiets a signalling NaN (sets the top
// mantissa bit), where F16ToFloat keeps the payload as it is. Those lanes get the bit cleared.
KILN_F16C void Widen8(const Float16* in, float* out) {
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
KILN_F16C void Narrow8(const float* in, Float16* out) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT));
}

// Eight lanes at a time; the last few go through a zero-padded block so that they take the
// same instructions.
template <class From, class To, void (*kConvert8)(const From*, To*)>
KILN_F16C void Convert(const From* in, To* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) kConvert8(in + i, out + i);
  if (i == n) return;
  From block[8] = {};
  To converted[8];
  std::memcpy(block, in + i, (n - i) * sizeof(From));
  kConvert8(block, converted);
  std::memcpy(out + i, converted, (n - i) * sizeof(To));
}

constexpr auto F16ToF32 = Convert<Float16, float, Widen8>;
constexpr auto F32ToF16 = Convert<float, Float16, Narrow8>;

#undef KILN_F16C

bool Supported() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"); }

#else  // not x86-64: never chosen

bool Supported() { return false; }
void F16ToF32(const Float16* in, float* out, int64_t n) { Scalar().f16_to_f32(in, out, n); }
void F32ToF16(const float* in, Float16* out, int64_t n) { Scalar().f32_to_f16(in, out, n); }

#endif

}  // namespace

const HalfConvertPath& F16c() {
  static const HalfConvertPath path{
      .name = "f16c",
      .supported = Supported,
      .bf16_to_f32 = Scalar().bf16_to_f32,
      .f32_to_bf16 = Scalar().f32_to_bf16,
      .f16_to_f32 = F16ToF32,
      .f32_to_f16 = F32ToF16,
  };
  return path;
}

}  // namespace kiln::cpu::half_convert
