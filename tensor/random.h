// Generator: a seeded random source that gives the same numbers on every backend and
// machine. Random tensors are drawn on the host from it and then moved to their device.
#ifndef KILN_TENSOR_RANDOM_H_
#define KILN_TENSOR_RANDOM_H_

#include <cstdint>

#include "tensor/tensor_data.h"

namespace kiln {

class Generator {
 public:
  explicit Generator(uint64_t seed) : state_(seed) {}
  uint64_t NextU64();    // SplitMix64: a counter through a strong mixer
  double NextUniform();  // [0, 1) with 53 random bits
  double NextNormal();   // standard normal (Box-Muller)
  // The whole state: Generator(state()) continues exactly where this one is (checkpoints).
  uint64_t state() const { return state_; }
  // Where this generator is after `draws` more NextU64 calls, in O(1) (SplitMix64's state is a
  // counter): lets a checkpoint's data position be checked against the steps it claims.
  void Skip(uint64_t draws) { state_ += draws * kGamma; }

  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // the counter's step

 private:
  uint64_t state_;
};

// Host tensors of floating dtype (f32 or f64); other dtypes throw InvalidArgument. Uniform
// values lie in [low, high), also after rounding to f32.
TensorData RandomUniform(const Shape& shape, DType dtype, double low, double high, Generator& gen);
TensorData RandomNormal(const Shape& shape, DType dtype, double mean, double stddev, Generator& gen);

}  // namespace kiln

#endif  // KILN_TENSOR_RANDOM_H_
