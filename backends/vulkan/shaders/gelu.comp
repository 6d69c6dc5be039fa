#version 450
#extension GL_GOOGLE_include_directive : require
// GELU of a dense input, exact 0.5 x erfc(-x / sqrt 2) (erfc keeps the digits of the tiny
// negative tail that 1 + erf would cancel) or the tanh form; backward: gy * gelu'(x).
#include "common.glsl"
#include "rows.glsl"
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t out_, x, gy;
  int n, tanh_, backward;
} p;

// 1/sqrt(2), sqrt(2/pi), 1/sqrt(2 pi) and the tanh form's cubic coefficient, in T (an f32
// kernel must hold no double).
#ifdef F64
const T r2 = 0.70710678118654752440LF, k = 0.79788456080286535588LF, inv_sqrt_2pi = 0.39894228040143267794LF;
const T c = 0.044715LF;
#else
const T r2 = 0.70710678118654752440, k = 0.79788456080286535588, inv_sqrt_2pi = 0.39894228040143267794;
const T c = 0.044715;
#endif

void main() {
  const T half_ = T(0.5);
  for (uint i = Linear(); i < uint(p.n); i += Stride()) {
    const T x = TS(p.x).v[i];
    T y;
    if (p.tanh_ != 0) {
      const T t = TANH(k * (x + c * x * x * x));
      y = p.backward == 0 ? half_ * x * (T(1) + t)
                          : half_ * (T(1) + t) + half_ * x * (T(1) - t * t) * k * (T(1) + T(3) * c * x * x);
    } else {
      const T cdf = half_ * ERFC(-x * r2);
      y = p.backward == 0 ? x * cdf : cdf + x * inv_sqrt_2pi * EXP(-half_ * x * x);
    }
    TS(p.out_).v[i] = p.backward == 0 ? y : TS(p.gy).v[i] * y;
  }
}
