// bf16 and f16 conversions as bit operations on 32-bit words, the same ones tensor/half.h
// does on the host, so a cast gives the CPU's result bit for bit: round to nearest even, NaN
// kept a (quiet) NaN, overflow to infinity. No float arithmetic is involved, so a device that
// flushes subnormals or rounds its own conversions differently still agrees with the CPU.
// Values travel as f32 bit patterns (uint), half values as uint holding 16 bits.

uint F32BitsToBf16(uint x) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x0040u;  // quiet NaN
  // The carry of (x + 0x7fff + lowest kept bit) rounds to nearest, ties to even, and a carry
  // out of the mantissa steps the exponent (up to infinity), which is right.
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

uint Bf16ToF32Bits(uint h) { return h << 16; }

uint F32BitsToF16(uint bits) {
  const uint sign = (bits >> 16) & 0x8000u;
  const uint x = bits & 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00u | ((x >> 13) & 0x3ffu);  // quiet NaN
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520, halfway past the largest: infinity
  if (x >= 0x38800000u) {                       // a normal f16: rebias, round 13 bits to even
    return sign | ((x + 0xfffu + ((x >> 13) & 1u) - 0x38000000u) >> 13);
  }
  if (x <= 0x33000000u) return sign;  // at most half the smallest subnormal: ties to 0
  // A subnormal f16: the value in units of 2^-24, rounded to nearest even.
  const uint shift = 126u - (x >> 23);  // 14..24
  const uint mantissa = (x & 0x7fffffu) | 0x800000u;
  const uint kept = mantissa >> shift;
  const uint rest = mantissa & ((1u << shift) - 1u);
  const uint half_way = 1u << (shift - 1u);
  return sign | (kept + ((rest > half_way || (rest == half_way && (kept & 1u) != 0u)) ? 1u : 0u));
}

uint F16ToF32Bits(uint h) {
  const uint sign = (h & 0x8000u) << 16;
  const uint exponent = (h >> 10) & 0x1fu;
  const uint mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return sign | 0x7f800000u | (mantissa << 13);  // inf, NaN
  if (exponent != 0u) return sign | ((exponent + 112u) << 23) | (mantissa << 13);
  if (mantissa == 0u) return sign;
  // A subnormal f16 is a normal f32: mantissa * 2^-24 with its leading bit made implicit.
  const int top = findMSB(mantissa);  // 0..9
  return sign | (uint(top + 103) << 23) | ((mantissa << uint(23 - top)) & 0x7fffffu);
}

// A nonzero integer magnitude as f32 bits, rounded to odd (truncated, lowest bit set when
// inexact): a second rounding to a 16-bit type is then correct (see half_bits::DoubleToFloatOdd).
uint MagnitudeToF32Odd(uint64_t m) {
  const uint hi = uint(m >> 32);
  const int top = hi != 0u ? 32 + findMSB(hi) : findMSB(uint(m));
  if (top <= 23) return (uint(top + 127) << 23) | ((uint(m) << uint(23 - top)) & 0x7fffffu);
  const uint shift = uint(top - 23);
  const bool inexact = (m & ((uint64_t(1) << shift) - uint64_t(1))) != uint64_t(0);
  return (uint(top + 127) << 23) | (uint(m >> shift) & 0x7fffffu) | (inexact ? 1u : 0u);
}

// The CPU goes integer -> double (exact for i32, nearest even for i64) -> f32 by round to odd.
// The magnitude is taken in the integer's own width (-INT_MIN wraps to the right unsigned).
uint Int32ToF32Odd(int v) {
  if (v == 0) return 0u;
  return (v < 0 ? 0x80000000u : 0u) | MagnitudeToF32Odd(uint64_t(v < 0 ? 0u - uint(v) : uint(v)));
}

uint Int64ToF32Odd(int64_t v) {
  if (v == int64_t(0)) return 0u;
  const uint sign = v < int64_t(0) ? 0x80000000u : 0u;
  uint64_t m = v < int64_t(0) ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  const uint hi = uint(m >> 32);
  const int top = hi != 0u ? 32 + findMSB(hi) : findMSB(uint(m));
  if (top > 52) {  // to 53 significant bits, nearest even (may carry to 2^(top+1))
    const uint shift = uint(top - 52);
    uint64_t kept = m >> shift;
    const uint64_t rest = m & ((uint64_t(1) << shift) - uint64_t(1));
    const uint64_t half_way = uint64_t(1) << (shift - 1u);
    if (rest > half_way || (rest == half_way && (kept & uint64_t(1)) != uint64_t(0))) kept += uint64_t(1);
    m = kept << shift;
  }
  return sign | MagnitudeToF32Odd(m);
}

// An f64 (as its bits) to f32 bits by round to odd, as half_bits::DoubleToFloatOdd on the host
// (whose NaN is the x86 conversion's: quiet, the top payload bits kept).
uint F64BitsToF32Odd(uint64_t d) {
  const uint sign = uint(d >> 32) & 0x80000000u;
  const uint64_t a = d & uint64_t(0x7fffffffffffffffUL);
  const int exponent = int(a >> 52);
  const uint64_t mantissa = a & uint64_t(0xfffffffffffffUL);
  if (exponent == 0x7ff) {
    return mantissa == uint64_t(0) ? sign | 0x7f800000u : sign | 0x7fc00000u | uint(mantissa >> 29);
  }
  if (a == uint64_t(0)) return sign;
  if (exponent == 0) return sign | 1u;  // an f64 subnormal: far below f32's, inexact
  const uint64_t m = mantissa | (uint64_t(1) << 52);
  const int e = exponent - 1023;
  if (e > 127) return sign | 0x7f7fffffu;  // past f32's range: the largest finite, odd
  // Bits of m below the f32 result's last place: 29 for a normal, more for a subnormal.
  const int shift = e >= -126 ? 29 : -e - 97;
  if (shift >= 64) return sign | 1u;
  const bool inexact = (m & ((uint64_t(1) << uint(shift)) - uint64_t(1))) != uint64_t(0);
  const uint kept = uint(m >> uint(shift));
  const uint biased = e >= -126 ? (uint(e + 127) << 23) | (kept & 0x7fffffu) : kept;
  return sign | biased | (inexact ? 1u : 0u);
}
