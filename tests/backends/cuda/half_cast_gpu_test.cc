// The GPU's bf16 and f16 conversions against the CPU's (tensor/half.h), bit for bit: all
// 65,536 patterns of each half type cast to every dtype, and f32 values around every half
// (ties, just above and below, NaNs with payloads) rounded to each half type. Needs a GPU.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"

namespace kiln {
namespace {

constexpr DType kAll[] = {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool, DType::kBF16, DType::kF16};

// `data` cast to `to` on cuda:0 and on the CPU: the same bytes.
void ExpectSameCast(const TensorData& data, DType to) {
  const TensorData cpu = Tensor<Cpu>::from_data(data).to(to).to_data();
  const TensorData gpu = Tensor<Cuda>::from_data(data, CudaDevice(0)).to(to).to_data();
  ASSERT_EQ(cpu.nbytes(), gpu.nbytes());
  const int64_t size = DTypeSize(to), n = cpu.nbytes() / size;
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto* c = static_cast<const unsigned char*>(cpu.raw()) + i * size;
    const auto* g = static_cast<const unsigned char*>(gpu.raw()) + i * size;
    if (std::memcmp(c, g, size) != 0 && ++mismatches <= 5) {
      ADD_FAILURE() << DTypeName(data.dtype()) << " -> " << DTypeName(to) << ": element " << i << " differs";
    }
  }
  EXPECT_EQ(mismatches, 0) << DTypeName(data.dtype()) << " -> " << DTypeName(to);
}

template <class H>
TensorData AllPatterns() {
  std::vector<H> values(65536);
  for (uint32_t b = 0; b < 65536; ++b) values[b] = H::FromBits(static_cast<uint16_t>(b));
  return TensorData::FromVector(values, Shape{65536});
}

class HalfCastCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Cuda::Available().ok()) GTEST_SKIP() << "needs a CUDA GPU: " << Cuda::Available();
  }
};

TEST_F(HalfCastCuda, EveryBf16PatternToEveryDType) {
  const TensorData data = AllPatterns<BFloat16>();
  for (DType to : kAll) ExpectSameCast(data, to);
}

TEST_F(HalfCastCuda, EveryF16PatternToEveryDType) {
  const TensorData data = AllPatterns<Float16>();
  for (DType to : kAll) ExpectSameCast(data, to);
}

// f32 values whose top 16 bits run over every pattern, with low halves at the rounding
// boundaries of bf16 (0x8000 is a tie) and elsewhere; the f16 boundaries fall among them too.
TEST_F(HalfCastCuda, F32RoundsToEachHalfAsTheCpu) {
  std::vector<float> values;
  for (uint32_t top = 0; top < 65536; ++top) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      values.push_back(std::bit_cast<float>(top << 16 | low));
    }
  }
  const TensorData data = TensorData::FromVector(values, Shape{static_cast<int64_t>(values.size())});
  ExpectSameCast(data, DType::kBF16);
  ExpectSameCast(data, DType::kF16);
}

// f64 and integers round once, correctly (no double rounding through f32).
TEST_F(HalfCastCuda, F64AndIntegersRoundOnce) {
  std::vector<double> doubles;
  std::vector<int64_t> ints;
  for (uint32_t top = 0; top < 65536; top += 7) {
    const double d = static_cast<double>(std::bit_cast<float>(top << 16));
    doubles.push_back(d);
    doubles.push_back(std::nextafter(d, 0.0));
    doubles.push_back(d * (1 + 0x1p-9) + 0x1p-40 * d);  // near a bf16 tie, off it by less than f32 can see
    doubles.push_back(d * (1 + 0x1p-12));               // an f16 tie
    ints.push_back(static_cast<int64_t>(top) * 4097 - (int64_t{1} << 27));
  }
  ints.push_back(INT64_MAX);
  ints.push_back(INT64_MIN);
  const TensorData d = TensorData::FromVector(doubles, Shape{static_cast<int64_t>(doubles.size())});
  const TensorData i = TensorData::FromVector(ints, Shape{static_cast<int64_t>(ints.size())});
  for (DType to : {DType::kBF16, DType::kF16}) {
    ExpectSameCast(d, to);
    ExpectSameCast(i, to);
  }
}

}  // namespace
}  // namespace kiln
