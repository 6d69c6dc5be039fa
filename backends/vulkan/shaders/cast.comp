#version 450
#extension GL_GOOGLE_include_directive : require
// Dense dst (type TO) = src view (type T) converted as the CPU backend does: float -> int
// saturates and maps NaN to 0, anything -> bool is != 0, bool -> anything is 0 or 1. A half
// source (FROM_HALF) is widened to f32 and converted from there; a half destination (TO_HALF)
// gets the f32 value (an f64 or integer rounded to odd first) rounded to nearest even.
#include "common.glsl"
#if defined(FROM_HALF) || defined(TO_HALF)
#include "half.glsl"
#endif
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

#if !defined(TO_HALF)
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
#endif

#if defined(FROM_HALF)
uint SourceF32Bits(int s) {
  const uint h = uint(U16s(p.src).v[s]);
#if defined(FROM_BF16)
  return Bf16ToF32Bits(h);
#else
  return F16ToF32Bits(h);
#endif
}
#elif defined(TO_HALF)
uint SourceF32Bits(int s) {  // exact, or rounded to odd
#if defined(F64)
  return F64BitsToF32Odd(U64s(p.src).v[s]);  // the bits: no f64 arithmetic on the device
#elif defined(KIND_I)
#if defined(I64)
  return Int64ToF32Odd(TS(p.src).v[s]);
#else
  return Int32ToF32Odd(TS(p.src).v[s]);
#endif
#elif defined(KIND_B)
  return U32s(p.src).v[s] != 0u ? 0x3f800000u : 0u;
#else
  return floatBitsToUint(TS(p.src).v[s]);
#endif
}
#endif

void Store(uint i, int s) {
#if defined(TO_HALF)
#if defined(TO_BF16)
  U16s(p.dst).v[i] = uint16_t(F32BitsToBf16(SourceF32Bits(s)));
#else
  U16s(p.dst).v[i] = uint16_t(F32BitsToF16(SourceF32Bits(s)));
#endif
#elif defined(FROM_HALF) && defined(TO_F32)
  U32s(p.dst).v[i] = SourceF32Bits(s);  // the bits themselves: NaN payloads survive
#elif defined(FROM_HALF)
  TOS(p.dst).v[i] = Convert(uintBitsToFloat(SourceF32Bits(s)));
#else
  TOS(p.dst).v[i] = Convert(TS(p.src).v[s]);
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
    Store(i, s);
  }
}
