#version 450
#extension GL_GOOGLE_include_directive : require
// Reduces rows of a contiguous [rows, len] input: workgroup w reduces chunk w % chunks of row
// w / chunks with a shared-memory tree, writing out[w]. One pass when chunks == 1; otherwise
// the [rows, chunks] partials are reduced again by a second launch (`count` > 0 on the last).
#include "common.glsl"
#include "reduce_ops.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t out_, x;
  int len, chunks, chunk_len, op, count, groups;
} p;

shared T partial[WORKGROUP];

void main() {
  const uint w = GroupIndex();
  if (w >= uint(p.groups)) return;  // a launch spilling into y has spare workgroups (uniform per group)
  const uint row = w / uint(p.chunks), chunk = w % uint(p.chunks);
  const uint lid = gl_LocalInvocationID.x;
  const int begin = int(chunk) * p.chunk_len;
  const int end = min(p.len, begin + p.chunk_len);
  const int op = p.op;
  T acc = Identity(op);
  for (int j = begin + int(lid); j < end; j += WORKGROUP) {
    acc = Combine(op, acc, TS(p.x).v[int(row) * p.len + j]);
  }
  partial[lid] = acc;
  barrier();
  for (uint s = WORKGROUP / 2; s > 0; s >>= 1) {
    if (lid < s) partial[lid] = Combine(op, partial[lid], partial[lid + s]);
    barrier();
  }
  if (lid == 0) TS(p.out_).v[w] = Finish(op, partial[0], p.count);
}
