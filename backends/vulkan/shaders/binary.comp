#version 450
#extension GL_GOOGLE_include_directive : require
// Dense out = a op b over broadcast views (rank <= 6). Op codes follow kiln::BinaryOp;
// comparisons (>= 7) write bool. Integer arithmetic wraps; a zero divisor was ruled out on
// the host (see ops.cc), and x / -1 is negation so that MIN / -1 wraps instead of trapping.
#include "common.glsl"
#include "math.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t out_, a, b;
  int n, rank, op, pad0;
  int shape[6], sa[6], sb[6];
} p;

#if defined(KIND_F)
T NanMax(T x, T y) { return isnan(x) || isnan(y) ? x + y : max(x, y); }
T NanMin(T x, T y) { return isnan(x) || isnan(y) ? x + y : min(x, y); }
#endif

T Arithmetic(T x, T y) {
#if !defined(KIND_B)
  switch (p.op) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
#if defined(KIND_F)
    case 3: return x / y;
#if defined(F64)
    case 4: return Pow64(x, y);
#else
    case 4: return Pow32(x, y);
#endif
    case 5: return NanMax(x, y);
    case 6: return NanMin(x, y);
#else
    case 3: return y == T(0) ? T(0) : y == T(-1) ? -x : x / y;
    case 5: return max(x, y);
    case 6: return min(x, y);
#endif
  }
#endif
  return x;
}

bool Compare(T x, T y) {
  switch (p.op) {
    case 7: return x == y;
    case 8: return x != y;
    case 9: return x < y;
    case 10: return x <= y;
    case 11: return x > y;
  }
  return x >= y;
}

void main() {
  for (uint i = Linear(); i < uint(p.n); i += Stride()) {
    uint rem = i;
    int ia = 0, ib = 0;
    // Dim 0 needs no division (rem < shape[0]): a contiguous run divides nowhere.
    for (int k = p.rank - 1; k > 0; --k) {
      const uint c = rem % uint(p.shape[k]);
      rem /= uint(p.shape[k]);
      ia += int(c) * p.sa[k];
      ib += int(c) * p.sb[k];
    }
    if (p.rank > 0) {
      const int k = 0;
      const uint c = rem;
      ia += int(c) * p.sa[k];
      ib += int(c) * p.sb[k];
    }
    const T x = TS(p.a).v[ia], y = TS(p.b).v[ib];
    if (p.op >= 7) {
      U32s(p.out_).v[i] = Compare(x, y) ? 1u : 0u;
    } else {
      TS(p.out_).v[i] = Arithmetic(x, y);
    }
  }
}
