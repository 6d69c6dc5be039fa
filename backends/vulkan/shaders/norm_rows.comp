#version 450
#extension GL_GOOGLE_include_directive : require
// Layer norm (or RMS norm: rms != 0) of each row of a dense [rows, len] input, one workgroup
// per row: y = (x - mean) * rstd * weight + bias with the weight and bias optional, and the
// row's mean and rstd (rms: rstd in both). The variance is taken around the mean in a second
// pass over the row, not as E[x^2] - mean^2, which cancels.
#include "common.glsl"
#include "rows.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t y, mean, rstd, x, weight, bias, eps;  // eps as its bits in T
  int rows, len, rms, has_weight, has_bias;
} p;

void main() {
  const int row = Row(), base = row * p.len;
  if (row >= p.rows) return;  // a launch spilling into y has spare workgroups
  const int lid = int(gl_LocalInvocationID.x);
  T mu = T(0);
  if (p.rms == 0) {
    T s = T(0);
    for (int j = lid; j < p.len; j += WORKGROUP) s += TS(p.x).v[base + j];
    mu = RowSum(s) / T(p.len);
  }
  T ss = T(0);
  for (int j = lid; j < p.len; j += WORKGROUP) {
    const T d = TS(p.x).v[base + j] - mu;
    ss += d * d;
  }
  const T rstd = T(1) / sqrt(RowSum(ss) / T(p.len) + FromBits(p.eps));
  for (int j = lid; j < p.len; j += WORKGROUP) {
    T y = (TS(p.x).v[base + j] - mu) * rstd;
    if (p.has_weight != 0) y *= TS(p.weight).v[j];
    if (p.has_bias != 0) y += TS(p.bias).v[j];
    TS(p.y).v[base + j] = y;
  }
  if (lid == 0) {
    TS(p.mean).v[row] = p.rms != 0 ? rstd : mu;
    TS(p.rstd).v[row] = rstd;
  }
}
