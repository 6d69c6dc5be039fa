#version 450
#extension GL_GOOGLE_include_directive : require
// Reduces the middle dim of a contiguous [outer, len, inner] input, one invocation per output
// (adjacent invocations read adjacent memory): the shape of short or strided reductions.
#include "common.glsl"
#include "reduce_ops.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t out_, x;
  int outer, len, inner, op, count;
} p;

void main() {
  for (uint i = Linear(); i < uint(p.outer * p.inner); i += Stride()) {
    const int o = int(i) / p.inner, in_ = int(i) % p.inner;
    const int base = o * p.len * p.inner + in_;
    T acc = Identity(p.op);
    for (int r = 0; r < p.len; ++r) acc = Combine(p.op, acc, TS(p.x).v[base + r * p.inner]);
    TS(p.out_).v[i] = Finish(p.op, acc, p.count);
  }
}
