#include "tensor/random.h"

#include <cmath>
#include <limits>
#include <numbers>

namespace kiln {

uint64_t Generator::NextU64() {
  uint64_t z = (state_ += kGamma);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Generator::NextUniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

double Generator::NextNormal() {
  // 1 - u lies in (0, 1], so the log is finite.
  const double u1 = 1.0 - NextUniform();
  const double u2 = NextUniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

namespace {

// The next value of T toward -infinity from a finite x.
float NextDown(float x) { return std::nextafter(x, -INFINITY); }
template <class H>
requires kIsHalf<H> H NextDown(H x) {
  // Stepping the bits toward -infinity: down for positive values, up for negative ones.
  const float f = static_cast<float>(x);
  if (f == 0) return H::FromBits(0x8001);  // the smallest negative subnormal
  return H::FromBits(f > 0 ? x.bits - 1 : x.bits + 1);
}

// `below`: an exclusive upper bound that rounding to f32 must not reach.
template <class Draw>
TensorData Fill(const Shape& shape, DType dtype, const char* what, Draw draw,
                double below = std::numeric_limits<double>::infinity()) {
  if (!IsFloating(dtype)) {
    ThrowInvalidArgument("%s: dtype %s is not floating; use f32, f64, bf16 or f16", what, DTypeName(dtype));
  }
  TensorData data(shape, dtype);
  if (dtype == DType::kF64) {
    for (double& x : data.mutable_values<double>()) {
      x = draw();
      if (x >= below) x = std::nextafter(below, -INFINITY);
    }
    return data;
  }
  // f32 and the half types: drawn in f32 (the half types then rounded from it), so every dtype
  // and every backend sees the same stream of numbers.
  VisitDType(dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, float> || kIsHalf<T>) {
      const auto reaches = [&](T x) { return static_cast<double>(static_cast<float>(x)) >= below; };
      T limit = T(static_cast<float>(below));  // then the largest T below the bound
      while (reaches(limit)) limit = NextDown(limit);
      for (T& x : data.mutable_values<T>()) {
        x = T(static_cast<float>(draw()));
        if (reaches(x)) x = limit;
      }
    }
  });
  return data;
}

}  // namespace

TensorData RandomUniform(const Shape& shape, DType dtype, double low, double high, Generator& gen) {
  if (!(low <= high)) ThrowInvalidArgument("uniform: low %g is greater than high %g", low, high);
  auto draw = [&] { return low + (high - low) * gen.NextUniform(); };
  return low < high ? Fill(shape, dtype, "uniform", draw, high) : Fill(shape, dtype, "uniform", draw);
}

TensorData RandomNormal(const Shape& shape, DType dtype, double mean, double stddev, Generator& gen) {
  if (!(stddev >= 0)) ThrowInvalidArgument("normal: stddev %g is negative", stddev);
  return Fill(shape, dtype, "normal", [&] { return mean + stddev * gen.NextNormal(); });
}

}  // namespace kiln
