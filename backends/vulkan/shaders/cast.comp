#version 450
#extension GL_GOOGLE_include_directive : require
// Dense dst (type TO) = src view (type T) converted as the CPU backend does: float -> int
// saturates and maps NaN to 0, anything -> bool is != 0, bool -> anything is 0 or 1.
#include "common.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t dst, src;
  int n, rank, pad0, pad1;
  int shape[8], strides[8];
} p;

// The integer destination's range; float sources at or past 2^31 (2^63) saturate.
#if defined(TO_I64)
#define TO_LIMIT 9223372036854775808.0
#define TO_MAX 9223372036854775807l
#define TO_MIN (-9223372036854775807l - 1l)
#else
#define TO_LIMIT 2147483648.0
#define TO_MAX 2147483647
#define TO_MIN (-2147483647 - 1)
#endif

TO Convert(T x) {
#if defined(TO_KIND_B)
  return x != T(0) ? 1u : 0u;
#elif defined(KIND_B)
  return TO(x != 0u ? 1 : 0);
#elif defined(TO_KIND_I) && defined(KIND_F)
  if (isnan(x)) return TO(0);
  if (x >= T(TO_LIMIT)) return TO_MAX;
  if (x <= -T(TO_LIMIT)) return TO_MIN;
  return TO(x);
#else
  return TO(x);
#endif
}

void main() {
  for (uint i = Linear(); i < uint(p.n); i += Stride()) {
    uint rem = i;
    int s = 0;
    // Dim 0 needs no division (rem < shape[0]): a contiguous run divides nowhere.
    for (int k = p.rank - 1; k > 0; --k) {
      const uint c = rem % uint(p.shape[k]);
      rem /= uint(p.shape[k]);
      s += int(c) * p.strides[k];
    }
    if (p.rank > 0) {
      const int k = 0;
      const uint c = rem;
      s += int(c) * p.strides[k];
    }
    TOS(p.dst).v[i] = Convert(TS(p.src).v[s]);
  }
}
