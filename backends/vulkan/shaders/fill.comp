#version 450
#extension GL_GOOGLE_include_directive : require
// dst[0, n) = one value, given as raw bits. Per element width W.
#include "common.glsl"
// 2-byte elements narrow from 32 bits (the conversion 16-bit storage allows), others take all.
#if defined(HALF_STORAGE)
#define FILL_BITS(b) uint(b)
#else
#define FILL_BITS(b) (b)
#endif
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t dst, bits;
  int n;
} p;

void main() {
  for (uint i = Linear(); i < uint(p.n); i += Stride()) WS(p.dst).v[i] = WT(FILL_BITS(p.bits));
}
