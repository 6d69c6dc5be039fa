// The reference path of backends/cpu/half_convert_paths.h: one scalar conversion per element.
#include "backends/cpu/half_convert_paths.h"

namespace kiln::cpu::half_convert {
namespace {

template <class To, class From>
void Loop(const From* in, To* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<To>(in[i]);
}

}  // namespace

const HalfConvertPath& Scalar() {
  static constexpr HalfConvertPath kPath{
      .name = "scalar",
      .supported = [] { return true; },
      .bf16_to_f32 = Loop<float, BFloat16>,
      .f32_to_bf16 = Loop<BFloat16, float>,
      .f16_to_f32 = Loop<float, Float16>,
      .f32_to_f16 = Loop<Float16, float>,
  };
  return kPath;
}

}  // namespace kiln::cpu::half_convert
