#version 450
#extension GL_GOOGLE_include_directive : require
// The gradient of softmax_rows.comp from its output y and the output's gradient gy, per row:
// softmax gx = y (gy - sum(gy y)), log-softmax gx = gy - exp(y) sum(gy), over kept columns;
// masked columns (and rows with none kept) get 0.
#include "common.glsl"
#include "rows.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t out_, y, gy;
  int rows, len, sq, shift, log_, causal;
} p;

void main() {
  const int row = Row(), base = row * p.len;
  if (row >= p.rows) return;  // a launch spilling into y has spare workgroups
  const int lid = int(gl_LocalInvocationID.x);
  const int kept = p.causal != 0 ? clamp(row % p.sq + 1 + p.shift, 0, p.len) : p.len;
  const bool log_ = p.log_ != 0;
  T s = T(0);
  for (int j = lid; j < kept; j += WORKGROUP) {
    const T g = TS(p.gy).v[base + j];
    s += log_ ? g : g * TS(p.y).v[base + j];
  }
  s = RowSum(s);
  for (int j = lid; j < p.len; j += WORKGROUP) {
    T gx = T(0);
    if (j < kept) {
      const T y = TS(p.y).v[base + j], g = TS(p.gy).v[base + j];
      gx = log_ ? g - EXP(y) * s : y * (g - s);
    }
    TS(p.out_).v[base + j] = gx;
  }
}
