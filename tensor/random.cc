#include "tensor/random.h"

#include <cmath>
#include <limits>
#include <numbers>

namespace kiln {

uint64_t Generator::NextU64() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
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

// `below`: an exclusive upper bound that rounding to f32 must not reach.
template <class Draw>
TensorData Fill(const Shape& shape, DType dtype, const char* what, Draw draw,
                double below = std::numeric_limits<double>::infinity()) {
  if (!IsFloating(dtype)) {
    ThrowInvalidArgument("%s: dtype %s is not floating; use f32 or f64", what, DTypeName(dtype));
  }
  TensorData data(shape, dtype);
  if (dtype == DType::kF32) {
    for (float& x : data.mutable_values<float>()) {
      x = static_cast<float>(draw());
      if (x >= below) x = std::nextafter(static_cast<float>(below), -INFINITY);
    }
  } else {
    for (double& x : data.mutable_values<double>()) {
      x = draw();
      if (x >= below) x = std::nextafter(below, -INFINITY);
    }
  }
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
