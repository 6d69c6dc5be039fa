// What the fused row kernels share (softmax, norms, cross-entropy): one workgroup per row of
// a dense [rows, len] input, each invocation striding over the row, then a shared-memory tree
// that every invocation takes part in (so call these from uniform control flow). The tree's
// shape is fixed by WORKGROUP, so results never depend on the device. Float types only.
#include "math.glsl"

#ifdef F64
#define EXP Exp64
#define LOG Log64
#define TANH Tanh64
#define ERF Erf64
#define ERFC Erf64c
T Infinity() { return Inf64(); }
T NotANumber() { return Nan64(); }
// A double handed over as its bits (push constants of the f32 variant hold no doubles).
T FromBits(uint64_t b) { return packDouble2x32(unpackUint2x32(b)); }
#else
#define EXP exp
#define LOG log
#define TANH Tanh32
#define ERF Erf32
#define ERFC Erf32c
T Infinity() { return uintBitsToFloat(0x7f800000u); }
T NotANumber() { return uintBitsToFloat(0x7fc00000u); }
T FromBits(uint64_t b) { return uintBitsToFloat(uint(b)); }
#endif

shared T red_a[WORKGROUP], red_b[WORKGROUP];

// The row index of this workgroup (launches spill into y; see common.glsl).
int Row() { return int(GroupIndex()); }

// NaN-propagating max, like the plain reductions'.
T MaxNaN(T a, T b) { return isnan(a) || isnan(b) ? a + b : max(a, b); }

T RowMax(T v) {
  const uint lid = gl_LocalInvocationID.x;
  red_a[lid] = v;
  barrier();
  for (uint s = WORKGROUP / 2; s > 0; s >>= 1) {
    if (lid < s) red_a[lid] = MaxNaN(red_a[lid], red_a[lid + s]);
    barrier();
  }
  const T r = red_a[0];
  barrier();  // red_a is reused by the next reduction
  return r;
}

T RowSum(T v) {
  const uint lid = gl_LocalInvocationID.x;
  red_a[lid] = v;
  barrier();
  for (uint s = WORKGROUP / 2; s > 0; s >>= 1) {
    if (lid < s) red_a[lid] += red_a[lid + s];
    barrier();
  }
  const T r = red_a[0];
  barrier();
  return r;
}

// Two sums in one tree.
void RowSum2(inout T a, inout T b) {
  const uint lid = gl_LocalInvocationID.x;
  red_a[lid] = a;
  red_b[lid] = b;
  barrier();
  for (uint s = WORKGROUP / 2; s > 0; s >>= 1) {
    if (lid < s) {
      red_a[lid] += red_a[lid + s];
      red_b[lid] += red_b[lid + s];
    }
    barrier();
  }
  a = red_a[0];
  b = red_b[0];
  barrier();
}
