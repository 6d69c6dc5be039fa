#version 450
#extension GL_GOOGLE_include_directive : require
// The logits' gradient of cross_entropy.comp, per element of the dense [rows, len] logits:
// g[row] (exp(x - lse[row]) - (1 - s) [col == target] - s / len), 0 on ignored rows.
#include "common.glsl"
#include "rows.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t gx, x, targets, lse, g, smoothing;  // smoothing as its bits in T
  int64_t ignore_index;
  int n, len;
} p;

void main() {
  const T s = FromBits(p.smoothing);
  for (uint i = Linear(); i < uint(p.n); i += Stride()) {
    const int row = int(i) / p.len, col = int(i) % p.len;
    const int64_t t = I64s(p.targets).v[row];
    T gx = T(0);
    if (t != p.ignore_index) {
      gx = EXP(TS(p.x).v[i] - TS(p.lse).v[row]) - s / T(p.len);
      if (int64_t(col) == t) gx -= T(1) - s;
      gx *= TS(p.g).v[row];
    }
    TS(p.gx).v[i] = gx;
  }
}
