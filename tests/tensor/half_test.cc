// bf16 and f16 conversions against references built another way: every one of the 65,536 bit
// patterns decoded by the formula of its format, and rounding checked against the nearest value
// found by search in double over the sorted list of all finite values.
#include "tensor/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/random.h"

namespace kiln {
namespace {

struct Format {
  int exponent_bits, mantissa_bits;
};
constexpr Format kBf16{8, 7}, kF16{5, 10};

// The value of a bit pattern by the textbook formula, in double.
double Decode(uint16_t bits, Format f) {
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const int exponent = (bits >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int mantissa = bits & ((1 << f.mantissa_bits) - 1);
  const double sign = bits & 0x8000 ? -1 : 1;
  if (exponent == (1 << f.exponent_bits) - 1) return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, 1 - bias - f.mantissa_bits);
  return sign * std::ldexp((1 << f.mantissa_bits) + mantissa, exponent - bias - f.mantissa_bits);
}

template <class H>
float ToFloat(uint16_t bits) {
  return static_cast<float>(H::FromBits(bits));
}

template <class H>
void ExpectDecodesEveryPattern(Format f) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const double want = Decode(static_cast<uint16_t>(b), f);
    const float got = ToFloat<H>(static_cast<uint16_t>(b));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << b;
      EXPECT_EQ(std::signbit(got), (b & 0x8000) != 0) << b;
      // Decoding then encoding keeps it a NaN with its sign; quiet NaNs come back bit for bit.
      const uint16_t back = H(got).bits;
      EXPECT_TRUE(std::isnan(ToFloat<H>(back))) << b;
      EXPECT_EQ(back & 0x8000, b & 0x8000) << b;
      if (b & (1u << (f.mantissa_bits - 1))) {
        EXPECT_EQ(back, b) << b;
      }
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), want) << b;
    EXPECT_EQ(std::signbit(got), (b & 0x8000) != 0) << b;  // -0 stays -0
    EXPECT_EQ(H(got).bits, b) << "round trip of " << b;
  }
}

TEST(Half, Bf16DecodesAll65536Patterns) { ExpectDecodesEveryPattern<BFloat16>(kBf16); }
TEST(Half, F16DecodesAll65536Patterns) { ExpectDecodesEveryPattern<Float16>(kF16); }

// The reference rounding: the nearest finite value by binary search over the sorted
// non-negative values, ties to the even pattern, infinity past the largest value plus half an
// ulp (IEEE's overflow rule).
class Rounder {
 public:
  explicit Rounder(Format f) : f_(f) {
    for (uint32_t b = 0; b < 0x8000; ++b) {
      const double v = Decode(static_cast<uint16_t>(b), f);
      if (std::isfinite(v)) values_.push_back(v);  // ascending with the pattern
    }
  }
  uint16_t Round(double x) const {
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::abs(x);
    const int max_exponent = (1 << (f_.exponent_bits - 1)) - 1;
    const double overflow = values_.back() + std::ldexp(1, max_exponent - f_.mantissa_bits - 1);
    const uint16_t inf = static_cast<uint16_t>(((1 << f_.exponent_bits) - 1) << f_.mantissa_bits);
    if (a >= overflow) return sign | inf;
    const auto hi = std::lower_bound(values_.begin(), values_.end(), a);
    if (hi == values_.end()) return sign | static_cast<uint16_t>(values_.size() - 1);
    const uint16_t up = static_cast<uint16_t>(hi - values_.begin());
    if (*hi == a || up == 0) return sign | up;
    const double below = a - values_[up - 1], above = *hi - a;
    if (below < above) return sign | (up - 1);
    if (above < below) return sign | up;
    return sign | ((up & 1) ? up - 1 : up);
  }
  const std::vector<double>& values() const { return values_; }

 private:
  Format f_;
  std::vector<double> values_;
};

// Floats where rounding decides: each value, the midpoints to its neighbours and the floats
// just either side of them, and the same across the overflow and underflow edges.
std::vector<float> Probes(const Rounder& r) {
  std::vector<float> out;
  const auto& v = r.values();
  const auto around = [&](double x) {
    const float f = static_cast<float>(x);
    out.push_back(f);
    out.push_back(std::nextafter(f, INFINITY));
    out.push_back(std::nextafter(f, -INFINITY));
  };
  for (size_t i = 0; i < v.size(); ++i) {
    around(v[i]);
    if (i + 1 < v.size()) around((v[i] + v[i + 1]) / 2);  // exact in f32 for both formats
  }
  around(v.back() * (1 + 1.0 / 512));
  around(v.back() * 2);
  around(std::ldexp(v[1], -1));
  std::vector<float> both = out;
  for (float f : out) both.push_back(-f);
  return both;
}

template <class H>
void ExpectRoundsToNearestEven(Format f) {
  const Rounder r(f);
  for (float x : Probes(r)) {
    ASSERT_EQ(H(x).bits, r.Round(x)) << "f32 " << x << " (bits " << std::bit_cast<uint32_t>(x) << ")";
  }
  // And a million random floats over every exponent.
  Generator gen(11);
  for (int i = 0; i < 1000000; ++i) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(gen.NextU64()));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(H(x)))) << std::bit_cast<uint32_t>(x);
      continue;
    }
    ASSERT_EQ(H(x).bits, r.Round(x)) << "f32 bits " << std::bit_cast<uint32_t>(x);
  }
  EXPECT_EQ(H(INFINITY).bits, r.Round(INFINITY));
  EXPECT_EQ(H(-INFINITY).bits, r.Round(-INFINITY));
}

TEST(Half, Bf16RoundsToNearestEven) { ExpectRoundsToNearestEven<BFloat16>(kBf16); }
TEST(Half, F16RoundsToNearestEven) { ExpectRoundsToNearestEven<Float16>(kF16); }

// From double, rounding must happen once: a double just past a tie goes up although its f32
// rounding lands on the tie.
template <class H>
void ExpectDoubleRoundsOnce(Format f) {
  const Rounder r(f);
  const auto& v = r.values();
  for (size_t i = 0; i + 1 < v.size(); i += 7) {
    const double mid = (v[i] + v[i + 1]) / 2;
    for (double x : {mid, std::nextafter(mid, INFINITY), std::nextafter(mid, 0.0), v[i], mid * (1 + 1e-12)}) {
      ASSERT_EQ(H(x).bits, r.Round(x)) << "double " << x;
      ASSERT_EQ(H(-x).bits, r.Round(-x)) << "double " << -x;
    }
  }
  EXPECT_EQ(H(1e300).bits, r.Round(1e300));
  EXPECT_EQ(H(1e-300).bits, 0);
  EXPECT_TRUE(std::isnan(static_cast<float>(H(std::nan("")))));
}

TEST(Half, Bf16FromDoubleRoundsOnce) { ExpectDoubleRoundsOnce<BFloat16>(kBf16); }
TEST(Half, F16FromDoubleRoundsOnce) { ExpectDoubleRoundsOnce<Float16>(kF16); }

TEST(Half, DTypes) {
  EXPECT_STREQ(DTypeName(DType::kBF16), "bf16");
  EXPECT_STREQ(DTypeName(DType::kF16), "f16");
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(DTypeSize(DType::kF16), 2);
  EXPECT_TRUE(IsFloating(DType::kBF16) && IsHalf(DType::kF16) && !IsHalf(DType::kF32));
  EXPECT_EQ(DTypeOf<BFloat16>(), DType::kBF16);
  EXPECT_EQ(DTypeOf<Float16>(), DType::kF16);
}

}  // namespace
}  // namespace kiln
