// The Vulkan casts to and from bf16 and f16 against the CPU's, bit for bit: every 16-bit
// pattern widened to each dtype, and f32, f64 and integer values rounded to the half types,
// around the ties and the range edges where rounding goes wrong first. Also the error a
// device without 16-bit storage gives.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/vulkan/context.h"
#include "backends/vulkan/vulkan_backend.h"
#include "tests/backends.h"

namespace kiln {
namespace {

class HalfCastTest : public ::testing::Test {
 protected:
  void SetUp() override { KILN_SKIP_IF_UNAVAILABLE(Vulkan); }

  // `source` cast to `to` on Vulkan and on the CPU; the two results' bytes must be equal.
  static void ExpectCastAsCpu(const TensorData& source, DType to) {
    const TensorData cpu = Tensor<Cpu>::from_data(source).to(to).to_data();
    const TensorData vk = Tensor<Vulkan>::from_data(source).to(to).to_data();
    ASSERT_EQ(cpu.dtype(), vk.dtype());
    const int64_t size = DTypeSize(to), n = source.numel();
    const auto* a = static_cast<const unsigned char*>(cpu.raw());
    const auto* b = static_cast<const unsigned char*>(vk.raw());
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::memcmp(a + i * size, b + i * size, size) == 0) continue;
      if (++wrong <= 5) {
        ADD_FAILURE() << DTypeName(source.dtype()) << " -> " << DTypeName(to) << " element " << i << " ("
                      << source.AsDouble(i) << "): cpu " << Hex(a + i * size, size) << ", vulkan "
                      << Hex(b + i * size, size);
      }
    }
    EXPECT_EQ(wrong, 0) << DTypeName(source.dtype()) << " -> " << DTypeName(to) << " over " << n << " values";
  }

  static std::string Hex(const unsigned char* p, int64_t size) {
    std::string out = "0x";
    for (int64_t k = size - 1; k >= 0; --k) absl::StrAppendFormat(&out, "%02x", p[k]);  // little-endian
    return out;
  }

  template <class H>
  static TensorData AllPatterns() {
    std::vector<H> all(65536);
    for (uint32_t b = 0; b < 65536; ++b) all[b] = H::FromBits(static_cast<uint16_t>(b));
    return TensorData::FromVector(all, Shape({65536}));
  }
};

constexpr DType kAll[] = {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool, DType::kBF16, DType::kF16};

TEST_F(HalfCastTest, EveryHalfPatternWidensAsOnTheCpu) {
  for (const TensorData& all : {AllPatterns<BFloat16>(), AllPatterns<Float16>()}) {
    for (DType to : kAll) {
      if (to != all.dtype()) ExpectCastAsCpu(all, to);
    }
  }
}

// f32 values on both sides of every half tie (the midpoint between neighbouring halves), the
// ties themselves, and random bit patterns (NaN payloads, subnormals, infinities included).
TEST_F(HalfCastTest, F32RoundsToHalvesAsOnTheCpu) {
  std::vector<float> values;
  for (uint32_t b = 0; b < 65536; ++b) {
    const float lo = static_cast<float>(BFloat16::FromBits(b)), hi = static_cast<float>(BFloat16::FromBits(b + 1));
    const float f16_lo = static_cast<float>(Float16::FromBits(b)),
                f16_hi = static_cast<float>(Float16::FromBits(b + 1));
    for (const auto& [x, y] : {std::pair{lo, hi}, std::pair{f16_lo, f16_hi}}) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      const float mid = static_cast<float>((static_cast<double>(x) + y) / 2);  // exact in f32
      values.insert(values.end(), {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY), x});
    }
  }
  std::mt19937 rng(19);
  for (int i = 0; i < (1 << 18); ++i) values.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  values.insert(values.end(), {65504.0f, 65519.99f, 65520.0f, 0x1p-25f, 0x1.000002p-25f, 0x1p-149f, -0.0f,
                               std::numeric_limits<float>::max(), INFINITY, -INFINITY,
                               std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0xffbfffffu)});
  const TensorData data = TensorData::FromVector(values, Shape({static_cast<int64_t>(values.size())}));
  ExpectCastAsCpu(data, DType::kBF16);
  ExpectCastAsCpu(data, DType::kF16);
}

// f64 and i64 are rounded twice on the CPU (to f32 by round to odd, then to the half type),
// which is correct only if the device rounds to odd too: values just off a tie, by less than
// an f32 can see, are where a plain f64 -> f32 -> half on the device would round wrongly.
TEST_F(HalfCastTest, F64AndIntegersRoundToHalvesAsOnTheCpu) {
  std::vector<double> doubles;
  std::vector<int64_t> longs;
  std::vector<int32_t> ints;
  for (uint32_t b = 0; b < 65536; ++b) {
    for (double x : {static_cast<double>(BFloat16::FromBits(b)), static_cast<double>(Float16::FromBits(b))}) {
      if (!std::isfinite(x)) continue;
      const double y = std::nextafter(static_cast<float>(x), INFINITY);
      doubles.insert(doubles.end(), {x, (x + y) / 2, (x + y) / 2 * (1 + 0x1p-40), (x + y) / 2 * (1 - 0x1p-40)});
    }
  }
  std::mt19937_64 rng(19);
  for (int i = 0; i < (1 << 16); ++i) {
    doubles.push_back(std::bit_cast<double>(static_cast<uint64_t>(rng())));
    const int shift = static_cast<int>(rng() % 64);
    longs.push_back(static_cast<int64_t>(rng()) >> shift);
    ints.push_back(static_cast<int32_t>(static_cast<uint32_t>(rng())) >> (shift % 32));
  }
  doubles.insert(doubles.end(), {0x1p-1074, -0x1p-1060, 0x1p-140, 0x1.8p-149, 0x1p-150, 0x1p200, -0x1p128,
                                 std::numeric_limits<double>::max(), 65520.0, 65519.999999, 0x1.01p127, -0.0,
                                 std::bit_cast<double>(0x7ff0000000000001ull), -NAN, INFINITY});
  // Integers past 2^53 that double rounds (nearest even) before f32 rounds to odd.
  for (int64_t base : {int64_t{1} << 53, int64_t{1} << 60, (int64_t{1} << 62) + (int64_t{1} << 40)}) {
    for (int64_t d = -3; d <= 3; ++d) longs.insert(longs.end(), {base + d, -(base + d), base * 3 / 2 + d});
  }
  longs.insert(longs.end(), {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0, 65520, 65519,
                             0x1000001, 0x1800001});
  ints.insert(ints.end(), {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 0, 65520, 65519,
                           0x1000001, -0x1800001, 257, 264, 265});
  const TensorData sources[] = {
      TensorData::FromVector(doubles, Shape({static_cast<int64_t>(doubles.size())})),
      TensorData::FromVector(longs, Shape({static_cast<int64_t>(longs.size())})),
      TensorData::FromVector(ints, Shape({static_cast<int64_t>(ints.size())})),
      Tensor<Cpu>::from_vector(std::vector<int32_t>{1, 0, 3}, {3}).ne(Tensor<Cpu>::zeros({3}, DType::kI32)).to_data(),
  };
  for (const TensorData& source : sources) {
    ExpectCastAsCpu(source, DType::kBF16);
    ExpectCastAsCpu(source, DType::kF16);
  }
}

// What the device says, for the report: lavapipe has 16-bit storage.
TEST_F(HalfCastTest, DeviceReportsSixteenBitStorage) {
  const vulkan::Context& c = vulkan::Context::Of(VulkanDevice(0));
  std::cout << c.name() << ": storageBuffer16BitAccess = " << c.has_16bit_storage() << "\n";
  if (!c.has_16bit_storage()) GTEST_SKIP() << c.name() << " has no 16-bit storage";
  EXPECT_EQ(Tensor<Vulkan>::full({2}, 1.5, DType::kF16).to_data().ToDoubles(), (std::vector<double>{1.5, 1.5}));
}

// A device without storageBuffer16BitAccess cannot run the half kernels (their SPIR-V declares
// it): every half tensor is refused where it is made, naming the device and the feature.
TEST_F(HalfCastTest, WithoutSixteenBitStorageHalvesAreUnimplemented) {
  vulkan::Context& c = vulkan::Context::Of(VulkanDevice(0));
  const bool had = c.has_16bit_storage();
  c.set_has_16bit_storage_for_testing(false);
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    try {
      (void)Tensor<Vulkan>::zeros({2}, dtype);
      ADD_FAILURE() << "no error for " << DTypeName(dtype);
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), absl::StatusCode::kUnimplemented);
      EXPECT_EQ(e.status().message(), absl::StrCat("vulkan:0 (", c.name(), ") has no storageBuffer16BitAccess; ",
                                                   DTypeName(dtype), " tensors need it (use f32 on this device)"));
    }
  }
  EXPECT_NO_THROW((void)Tensor<Vulkan>::zeros({2}, DType::kF32));  // other dtypes unaffected
  c.set_has_16bit_storage_for_testing(had);
}

}  // namespace
}  // namespace kiln
