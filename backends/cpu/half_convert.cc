// Dispatch of backends/cpu/half_convert.h to a path of backends/cpu/half_convert_paths.h, and
// the strided forms on top of the contiguous ones.
#include "backends/cpu/half_convert.h"

#include <algorithm>

#include "backends/cpu/half_convert_paths.h"

namespace kiln::cpu {
namespace {

// A strided input is gathered block by block into a buffer that stays in L1, so every element
// goes through the same contiguous conversion whatever the layout.
template <class From, class To>
void Strided(void (*convert)(const From*, To*, int64_t), const From* in, int64_t stride, To* out, int64_t n) {
  if (stride == 1) return convert(in, out, n);
  if (stride == 0 && n > 0) {
    convert(in, out, 1);
    std::fill(out + 1, out + n, out[0]);
    return;
  }
  constexpr int64_t kBlock = 256;
  From block[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = std::min(kBlock, n - i);
    for (int64_t j = 0; j < m; ++j) block[j] = in[(i + j) * stride];
    convert(block, out + i, m);
  }
}

}  // namespace

std::span<const HalfConvertPath* const> HalfConvertPaths() {
  static const HalfConvertPath* const kPaths[] = {&half_convert::Scalar(), &half_convert::Avx2(),
                                                  &half_convert::Avx512()};
  return kPaths;
}

const HalfConvertPath& ActiveHalfConvertPath() {
  static const HalfConvertPath& active = []() -> const HalfConvertPath& {
    const auto paths = HalfConvertPaths();
    for (auto it = paths.rbegin(); it != paths.rend(); ++it) {
      if ((*it)->supported()) return **it;
    }
    return *paths.front();
  }();
  return active;
}

void HalfToFloat(const BFloat16* in, int64_t stride, float* out, int64_t n) {
  Strided(ActiveHalfConvertPath().bf16_to_f32, in, stride, out, n);
}
void HalfToFloat(const Float16* in, int64_t stride, float* out, int64_t n) {
  Strided(ActiveHalfConvertPath().f16_to_f32, in, stride, out, n);
}
void FloatToHalf(const float* in, int64_t stride, BFloat16* out, int64_t n) {
  Strided(ActiveHalfConvertPath().f32_to_bf16, in, stride, out, n);
}
void FloatToHalf(const float* in, int64_t stride, Float16* out, int64_t n) {
  Strided(ActiveHalfConvertPath().f32_to_f16, in, stride, out, n);
}

const char* HalfConvertPathName() { return ActiveHalfConvertPath().name; }

}  // namespace kiln::cpu
