#version 450
#extension GL_GOOGLE_include_directive : require
// Softmax (log: log-softmax) of each row of a dense [rows, len] input, one workgroup per row.
// causal: row r is row i = r % sq of a [sq, len] block and keeps columns j < i + 1 + shift
// (shift = sk - sq); masked columns are 0 (log: -inf), a row with none kept is NaN.
#include "common.glsl"
#include "rows.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t out_, x;
  int rows, len, sq, shift, log_, causal;
} p;

void main() {
  const int row = Row(), base = row * p.len;
  if (row >= p.rows) return;  // a launch spilling into y has spare workgroups
  const int lid = int(gl_LocalInvocationID.x);
  const int kept = p.causal != 0 ? clamp(row % p.sq + 1 + p.shift, 0, p.len) : p.len;
  T m = -Infinity();
  for (int j = lid; j < kept; j += WORKGROUP) m = MaxNaN(m, TS(p.x).v[base + j]);
  m = RowMax(m);
  T s = T(0);
  for (int j = lid; j < kept; j += WORKGROUP) s += EXP(TS(p.x).v[base + j] - m);
  s = RowSum(s);
  const T log_s = LOG(s);
  for (int j = lid; j < p.len; j += WORKGROUP) {
    T y;
    if (kept == 0) {
      y = NotANumber();
    } else if (j >= kept) {
      y = p.log_ != 0 ? -Infinity() : T(0);
    } else {
      const T d = TS(p.x).v[base + j] - m;
      y = p.log_ != 0 ? d - log_s : EXP(d) / s;
    }
    TS(p.out_).v[base + j] = y;
  }
}
