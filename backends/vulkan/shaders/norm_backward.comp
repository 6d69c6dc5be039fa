#version 450
#extension GL_GOOGLE_include_directive : require
// The input gradient of norm_rows.comp, one workgroup per row: with xhat = (x - mean) * rstd
// (rms: x * rstd) and g = gy * weight, gx = rstd (g - mean(g) - xhat mean(g xhat)), without the
// mean(g) term for rms.
#include "common.glsl"
#include "rows.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t gx, gy, x, weight, mean, rstd;
  int rows, len, rms, has_weight;
} p;

void main() {
  const int row = Row(), base = row * p.len;
  if (row >= p.rows) return;  // a launch spilling into y has spare workgroups
  const int lid = int(gl_LocalInvocationID.x);
  const T mu = p.rms != 0 ? T(0) : TS(p.mean).v[row], r = TS(p.rstd).v[row];
  T sg = T(0), sgx = T(0);
  for (int j = lid; j < p.len; j += WORKGROUP) {
    const T xhat = (TS(p.x).v[base + j] - mu) * r;
    const T g = p.has_weight != 0 ? TS(p.gy).v[base + j] * TS(p.weight).v[j] : TS(p.gy).v[base + j];
    sg += g;
    sgx += g * xhat;
  }
  RowSum2(sg, sgx);
  const T mg = p.rms != 0 ? T(0) : sg / T(p.len), mgx = sgx / T(p.len);
  for (int j = lid; j < p.len; j += WORKGROUP) {
    const T xhat = (TS(p.x).v[base + j] - mu) * r;
    const T g = p.has_weight != 0 ? TS(p.gy).v[base + j] * TS(p.weight).v[j] : TS(p.gy).v[base + j];
    TS(p.gx).v[base + j] = r * (g - mg - xhat * mgx);
  }
}
