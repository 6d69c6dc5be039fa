#version 450
#extension GL_GOOGLE_include_directive : require
// Dense out = cond ? a : b over broadcast views (rank <= 5). Per element width W.
#include "common.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t out_, cond, a, b;
  int n, rank, pad0, pad1;
  int shape[5], sc[5], sa[5], sb[5];
} p;

void main() {
  for (uint i = Linear(); i < uint(p.n); i += Stride()) {
    uint rem = i;
    int ic = 0, ia = 0, ib = 0;
    // Dim 0 needs no division (rem < shape[0]): a contiguous run divides nowhere.
    for (int k = p.rank - 1; k > 0; --k) {
      const uint c = rem % uint(p.shape[k]);
      rem /= uint(p.shape[k]);
      ic += int(c) * p.sc[k];
      ia += int(c) * p.sa[k];
      ib += int(c) * p.sb[k];
    }
    if (p.rank > 0) {
      const int k = 0;
      const uint c = rem;
      ic += int(c) * p.sc[k];
      ia += int(c) * p.sa[k];
      ib += int(c) * p.sb[k];
    }
    // A branch, not a select: on 2-byte elements a select would be 16-bit arithmetic.
    if (U32s(p.cond).v[ic] != 0u) {
      WS(p.out_).v[i] = WS(p.a).v[ia];
    } else {
      WS(p.out_).v[i] = WS(p.b).v[ib];
    }
  }
}
