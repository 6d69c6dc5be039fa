#version 450
#extension GL_GOOGLE_include_directive : require
// out[o, i] = index of the first maximum of x[o, :, i] (contiguous [outer, len, inner]); NaN
// counts as the maximum, as on the CPU. One invocation per output.
#include "common.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t out_, x;
  int outer, len, inner;
} p;

void main() {
  for (uint i = Linear(); i < uint(p.outer * p.inner); i += Stride()) {
    const int o = int(i) / p.inner, in_ = int(i) % p.inner;
    const int base = o * p.len * p.inner + in_;
    T best = TS(p.x).v[base];
    int best_index = 0;
    for (int r = 1; r < p.len; ++r) {
      const T value = TS(p.x).v[base + r * p.inner];
      bool better = value > best;
  #if defined(KIND_F)
      better = better || (isnan(value) && !isnan(best));
  #endif
      if (better) {
        best = value;
        best_index = r;
      }
    }
    I64s(p.out_).v[i] = int64_t(best_index);
  }
}
