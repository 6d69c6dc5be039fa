// The 16-bit float types bf16 (8-bit exponent, 7-bit mantissa) and f16 (IEEE binary16): storage
// types whose arithmetic is done in f32. Conversions from f32 round to nearest even, overflow to
// infinity and keep NaN a NaN (quiet, with its sign), the same on every backend, so a seed gives
// the same numbers everywhere. Plain bit operations, so nvcc and every compiler agree.
#ifndef KILN_TENSOR_HALF_H_
#define KILN_TENSOR_HALF_H_

#include <bit>
#include <cstdint>
#include <type_traits>

namespace kiln {

namespace half_bits {

constexpr uint16_t FloatToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  // Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even; a carry out of the
  // mantissa bumps the exponent (up to infinity), which is the right answer.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

constexpr float Bf16ToFloat(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

constexpr uint16_t FloatToF16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t x = bits & 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((x >> 13) & 0x3ffu);  // quiet NaN
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 (halfway past 65504): infinity
  if (x >= 0x38800000u) {                       // >= 2^-14: a normal f16
    // Rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
    const uint32_t rounded = x + 0xfffu + ((x >> 13) & 1u);
    return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
  }
  if (x <= 0x33000000u) return sign;  // <= 2^-25 (half the smallest subnormal, tie to 0)
  // A subnormal f16: the value in units of 2^-24, rounded to nearest even.
  const uint32_t exponent = x >> 23;
  const uint32_t mantissa = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;  // 14..24
  const uint32_t kept = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  const uint32_t up = rest > half || (rest == half && (kept & 1u)) ? 1u : 0u;
  return sign | static_cast<uint16_t>(kept + up);
}

constexpr float F16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24 is exact in f32.
  const float magnitude = static_cast<float>(mantissa) * 0x1.0p-24f;
  return sign ? -magnitude : magnitude;
}

// A double rounded to f32 by round-to-odd (truncate, then set the lowest bit when inexact): a
// second rounding from there to a 16-bit type then gives the correctly rounded result.
constexpr float DoubleToFloatOdd(double d) {
  const float f = static_cast<float>(d);
  if (d != d || static_cast<double>(f) == d) return f;  // NaN or exact
  uint32_t bits = std::bit_cast<uint32_t>(f);
  const bool away = (f < 0 ? -static_cast<double>(f) : static_cast<double>(f)) > (d < 0 ? -d : d);
  if (away) bits -= 1;  // step back toward zero (from infinity too: to the largest finite)
  return std::bit_cast<float>(bits | 1u);
}

}  // namespace half_bits

// bf16: the top half of an f32.
struct BFloat16 {
  uint16_t bits = 0;
  constexpr BFloat16() = default;
  constexpr explicit BFloat16(float f) : bits(half_bits::FloatToBf16(f)) {}
  constexpr explicit BFloat16(double d) : bits(half_bits::FloatToBf16(half_bits::DoubleToFloatOdd(d))) {}
  constexpr explicit operator float() const { return half_bits::Bf16ToFloat(bits); }
  constexpr explicit operator double() const { return half_bits::Bf16ToFloat(bits); }
  static constexpr BFloat16 FromBits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  // By value, as floats compare: NaN equals nothing, -0 equals 0.
  friend constexpr bool operator==(BFloat16 a, BFloat16 b) {
    return half_bits::Bf16ToFloat(a.bits) == half_bits::Bf16ToFloat(b.bits);
  }
};

// f16: IEEE 754 binary16 (5-bit exponent, 10-bit mantissa, subnormals).
struct Float16 {
  uint16_t bits = 0;
  constexpr Float16() = default;
  constexpr explicit Float16(float f) : bits(half_bits::FloatToF16(f)) {}
  constexpr explicit Float16(double d) : bits(half_bits::FloatToF16(half_bits::DoubleToFloatOdd(d))) {}
  constexpr explicit operator float() const { return half_bits::F16ToFloat(bits); }
  constexpr explicit operator double() const { return half_bits::F16ToFloat(bits); }
  static constexpr Float16 FromBits(uint16_t b) {
    Float16 h;
    h.bits = b;
    return h;
  }
  // By value, as floats compare: NaN equals nothing, -0 equals 0.
  friend constexpr bool operator==(Float16 a, Float16 b) {
    return half_bits::F16ToFloat(a.bits) == half_bits::F16ToFloat(b.bits);
  }
};

template <class T>
inline constexpr bool kIsHalf = std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>;

// A number as a half type, correctly rounded from any arithmetic type (integers through double).
template <class H, class From>
requires kIsHalf<H>
constexpr H ToHalf(From v) {
  if constexpr (kIsHalf<From>) {
    return H(static_cast<float>(v));
  } else if constexpr (std::is_same_v<From, float>) {
    return H(v);
  } else {
    return H(static_cast<double>(v));
  }
}

}  // namespace kiln

#endif  // KILN_TENSOR_HALF_H_
