#version 450
#extension GL_GOOGLE_include_directive : require
// The weight's and bias's gradients of norm_rows.comp, column sums over rows: invocation i
// sums column i % len over the rows of chunk i / len (chunk_rows each) in row order, into
// [chunks, len] partials that the host sums over chunks in a fixed order. No atomics: the
// sums are the same on every run and device.
#include "common.glsl"
#include "rows.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t weight_part, bias_part, gy, x, mean, rstd;
  int rows, len, chunks, chunk_rows, rms, has_weight, has_bias;
} p;

void main() {
  for (uint i = Linear(); i < uint(p.chunks * p.len); i += Stride()) {
    const int chunk = int(i) / p.len, col = int(i) % p.len;
    const int end = min(p.rows, (chunk + 1) * p.chunk_rows);
    T sw = T(0), sb = T(0);
    for (int r = chunk * p.chunk_rows; r < end; ++r) {
      const T gy = TS(p.gy).v[r * p.len + col];
      if (p.has_weight != 0) {
        const T mu = p.rms != 0 ? T(0) : TS(p.mean).v[r];
        sw += gy * ((TS(p.x).v[r * p.len + col] - mu) * TS(p.rstd).v[r]);
      }
      sb += gy;
    }
    if (p.has_weight != 0) TS(p.weight_part).v[i] = sw;
    if (p.has_bias != 0) TS(p.bias_part).v[i] = sb;
  }
}
