#version 450
#extension GL_GOOGLE_include_directive : require
// Cross-entropy of each row of dense [rows, len] logits against an i64 target per row, one
// workgroup per row: lse = log sum exp(x), loss = lse - (1 - s) x[target] - (s / len) sum(x),
// 0 where the target is ignore_index. Targets were checked on the host; the clamp only keeps
// the read in bounds.
#include "common.glsl"
#include "rows.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t loss, lse, x, targets, smoothing;  // smoothing as its bits in T
  int64_t ignore_index;
  int rows, len;
} p;

void main() {
  const int row = Row(), base = row * p.len;
  if (row >= p.rows) return;  // a launch spilling into y has spare workgroups
  const int lid = int(gl_LocalInvocationID.x);
  T m = -Infinity();
  for (int j = lid; j < p.len; j += WORKGROUP) m = MaxNaN(m, TS(p.x).v[base + j]);
  m = RowMax(m);
  T se = T(0), sx = T(0);
  for (int j = lid; j < p.len; j += WORKGROUP) {
    const T x = TS(p.x).v[base + j];
    se += EXP(x - m);
    sx += x;
  }
  RowSum2(se, sx);
  if (lid != 0) return;
  const T lse = m + LOG(se);
  TS(p.lse).v[row] = lse;
  const int64_t t = I64s(p.targets).v[row];
  T loss = T(0);
  if (t != p.ignore_index && p.len > 0) {
    const T s = FromBits(p.smoothing);
    loss = lse - (T(1) - s) * TS(p.x).v[base + int(clamp(t, 0l, int64_t(p.len - 1)))];
    if (s != T(0)) loss -= s / T(p.len) * sx;  // s = 0 ignores sum(x) even when it is not finite
  }
  TS(p.loss).v[row] = loss;
}
