// Sum/mean, max and min (kiln::ReduceOp codes 0..3) of type T: float max/min propagate NaN,
// integer sums wrap.
#if defined(KIND_F) && defined(F64)
T Lowest() { return -packDouble2x32(uvec2(0u, 0x7ff00000u)); }
T Highest() { return packDouble2x32(uvec2(0u, 0x7ff00000u)); }
#elif defined(KIND_F)
T Lowest() { return uintBitsToFloat(0xff800000u); }
T Highest() { return uintBitsToFloat(0x7f800000u); }
#elif defined(I64)
T Lowest() { return -9223372036854775807l - 1l; }
T Highest() { return 9223372036854775807l; }
#else
T Lowest() { return -2147483647 - 1; }
T Highest() { return 2147483647; }
#endif

T Identity(int op) { return op == 2 ? Lowest() : op == 3 ? Highest() : T(0); }

T Combine(int op, T a, T b) {
  if (op <= 1) return a + b;
#if defined(KIND_F)
  if (isnan(a) || isnan(b)) return a + b;
#endif
  return op == 2 ? max(a, b) : min(a, b);
}

// The mean's division, applied once at the end: floats divide, integers truncate.
T Finish(int op, T acc, int count) {
  return op == 1 && count > 0 ? acc / T(count) : acc;
}
