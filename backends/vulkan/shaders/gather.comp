#version 450
#extension GL_GOOGLE_include_directive : require
// Dense out (the index's shape, rank <= 5) = src at each position with its `dim` coordinate
// replaced by index there. Index values were checked on the host; the clamp only keeps a
// device read in bounds. index_select is this with a broadcast index. Per element width W.
#include "common.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t out_, src, index;
  int n, rank, dim, dim_size;
  int shape[5], src_strides[5], index_strides[5];
} p;

void main() {
  for (uint i = Linear(); i < uint(p.n); i += Stride()) {
    uint rem = i;
    int s = 0, ix = 0;
    // Dim 0 needs no division (rem < shape[0]): a contiguous run divides nowhere.
    for (int k = p.rank - 1; k > 0; --k) {
      const uint c = rem % uint(p.shape[k]);
      rem /= uint(p.shape[k]);
      ix += int(c) * p.index_strides[k];
      if (k != p.dim) s += int(c) * p.src_strides[k];
    }
    if (p.rank > 0) {
      const int k = 0;
      const uint c = rem;
      ix += int(c) * p.index_strides[k];
      if (k != p.dim) s += int(c) * p.src_strides[k];
    }
    const int64_t j = clamp(I64s(p.index).v[ix], 0l, int64_t(p.dim_size - 1));
    WS(p.out_).v[i] = WS(p.src).v[s + int(j) * p.src_strides[p.dim]];
  }
}
