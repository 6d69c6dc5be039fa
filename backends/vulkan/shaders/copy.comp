#version 450
#extension GL_GOOGLE_include_directive : require
// dst view = src view, element for element, both strided (rank <= 8). Per element width W.
#include "common.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t dst, src;
  int n, rank, pad0, pad1;
  int shape[8], src_strides[8], dst_strides[8];
} p;

void main() {
  for (uint i = Linear(); i < uint(p.n); i += Stride()) {
    uint rem = i;
    int s = 0, d = 0;
    // Dim 0 needs no division (rem < shape[0]): a contiguous run divides nowhere.
    for (int k = p.rank - 1; k > 0; --k) {
      const uint c = rem % uint(p.shape[k]);
      rem /= uint(p.shape[k]);
      s += int(c) * p.src_strides[k];
      d += int(c) * p.dst_strides[k];
    }
    if (p.rank > 0) {
      const int k = 0;
      const uint c = rem;
      s += int(c) * p.src_strides[k];
      d += int(c) * p.dst_strides[k];
    }
    WS(p.dst).v[d] = WS(p.src).v[s];
  }
}
