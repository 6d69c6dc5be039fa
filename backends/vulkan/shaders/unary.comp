#version 450
#extension GL_GOOGLE_include_directive : require
// Dense out = op(x view), rank <= 8. Op codes follow kiln::UnaryOp.
#include "common.glsl"
#include "math.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t out_, x;
  int n, rank, op, pad0;
  int shape[8], strides[8];
} p;

T Apply(T a) {
  switch (p.op) {
    case 0: return -a;
    case 1: return abs(a);
    case 7: return a < T(0) ? T(0) : a;  // NaN stays NaN
#if defined(KIND_F) && defined(F64)
    case 2: return Exp64(a);
    case 3: return Log64(a);
    case 4: return sqrt(a);
    case 5: return Tanh64(a);
    case 6: return 1.0LF / (1.0LF + Exp64(-a));
    case 8: return Erf64(a);
#elif defined(KIND_F)
    case 2: return exp(a);
    case 3: return log(a);
    case 4: return sqrt(a);
    case 5: return Tanh32(a);
    case 6: return 1.0 / (1.0 + exp(-a));
    case 8: return Erf32(a);
#endif
  }
  return a;
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
    TS(p.out_).v[i] = Apply(TS(p.x).v[s]);
  }
}
