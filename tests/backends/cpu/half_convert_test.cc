// Every path of the bulk half conversions (backends/cpu/half_convert_paths.h) against
// tensor/half.h's scalar functions, bit for bit: all 65,536 patterns to f32; from f32, every
// pattern within a few ulps of every rounding boundary and of every half value, every f32 NaN,
// infinity, denormal and zero, and millions of random patterns (all 2^32 in the exhaustive
// target); odd lengths and offsets; and under a changed MXCSR (rounding mode, flush to zero).
// A path this CPU lacks is skipped.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/half_convert.h"
#include "backends/cpu/half_convert_paths.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln {
namespace {

using cpu::HalfConvertPath;

// The conversions of one half type, so one test body covers both.
template <class H>
struct Ops;
template <>
struct Ops<BFloat16> {
  static constexpr auto kToFloat = &HalfConvertPath::bf16_to_f32;
  static constexpr auto kFromFloat = &HalfConvertPath::f32_to_bf16;
};
template <>
struct Ops<Float16> {
  static constexpr auto kToFloat = &HalfConvertPath::f16_to_f32;
  static constexpr auto kFromFloat = &HalfConvertPath::f32_to_f16;
};

template <class H>
uint32_t ScalarToFloat(uint16_t h) {
  return std::bit_cast<uint32_t>(static_cast<float>(H::FromBits(h)));
}
template <class H>
uint16_t ScalarFromFloat(uint32_t x) {
  return H(std::bit_cast<float>(x)).bits;
}

std::string Hex(uint32_t x) {
  char s[16];
  std::snprintf(s, sizeof s, "0x%08x", x);
  return s;
}

// Every half pattern widened by `path` in one call.
template <class H>
void ExpectWidensEveryPattern(const HalfConvertPath& path) {
  std::vector<H> in(65536);
  for (uint32_t h = 0; h < 65536; ++h) in[h] = H::FromBits(static_cast<uint16_t>(h));
  std::vector<float> out(in.size());
  (path.*Ops<H>::kToFloat)(in.data(), out.data(), static_cast<int64_t>(in.size()));
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(std::bit_cast<uint32_t>(out[h]), ScalarToFloat<H>(static_cast<uint16_t>(h)))
        << path.name << " half pattern " << Hex(h);
  }
}

// f32 patterns around every half value and every midpoint between neighbours: the rounding
// boundaries, ties included, of normals, subnormals and overflow, both signs.
template <class H>
const std::vector<uint32_t>& BoundaryInputs() {
  static const std::vector<uint32_t> x = [] {
    std::vector<uint32_t> x;
    for (uint32_t h = 0; h < 0x8000; ++h) {
      const float v = std::bit_cast<float>(ScalarToFloat<H>(static_cast<uint16_t>(h)));
      if (!std::isfinite(v)) continue;
      const float next = std::bit_cast<float>(ScalarToFloat<H>(static_cast<uint16_t>(h + 1)));
      const float prev = h == 0 ? 0.0f : std::bit_cast<float>(ScalarToFloat<H>(static_cast<uint16_t>(h - 1)));
      // The step to the next value; past the largest finite one, the step below it (IEEE
      // overflow happens half an ulp above the largest value).
      const double ulp = std::isfinite(next) ? double{next} - v : double{v} - prev;
      const uint32_t mid = std::bit_cast<uint32_t>(static_cast<float>(v + ulp / 2));  // exact in f32
      for (const uint32_t centre : {std::bit_cast<uint32_t>(v), mid}) {
        for (int d = -3; d <= 3; ++d) {
          const uint32_t p = centre + static_cast<uint32_t>(d);
          x.push_back(p);
          x.push_back(p ^ 0x80000000u);
        }
      }
    }
    return x;
  }();
  return x;
}

template <class H>
void ExpectRounds(const HalfConvertPath& path, const std::vector<uint32_t>& inputs) {
  std::vector<float> in(inputs.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::bit_cast<float>(inputs[i]);
  std::vector<H> out(in.size());
  (path.*Ops<H>::kFromFloat)(in.data(), out.data(), static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(out[i].bits, ScalarFromFloat<H>(inputs[i])) << path.name << " f32 pattern " << Hex(inputs[i]);
  }
}

// The boundaries; then, a million at a time, 4 million random patterns and every zero,
// denormal, infinity and NaN of both signs.
template <class H>
void ExpectRoundsLikeTheScalar(const HalfConvertPath& path) {
  ExpectRounds<H>(path, BoundaryInputs<H>());
  constexpr uint32_t kChunk = 1u << 20;
  std::vector<uint32_t> chunk(kChunk);
  std::mt19937 gen(19);
  for (int i = 0; i < 4 && !testing::Test::HasFatalFailure(); ++i) {
    for (uint32_t& x : chunk) x = static_cast<uint32_t>(gen());
    ExpectRounds<H>(path, chunk);
  }
  for (const uint32_t high : {0u, 0x7f800000u, 0x80000000u, 0xff800000u}) {
    for (uint32_t m0 = 0; m0 < (1u << 23) && !testing::Test::HasFatalFailure(); m0 += kChunk) {
      for (uint32_t m = 0; m < kChunk; ++m) chunk[m] = high | (m0 + m);
      ExpectRounds<H>(path, chunk);
    }
  }
}

// Lengths around the vector widths and offsets that misalign both sides; nothing outside the
// run is written.
template <class H>
void ExpectEveryLengthAndOffset(const HalfConvertPath& path) {
  std::mt19937 gen(7);
  constexpr uint16_t kGuardHalf = 0x5a5a;
  constexpr float kGuardFloat = 12345.0f;
  for (int64_t n = 0; n <= 70; ++n) {
    for (int64_t offset = 0; offset < 9; ++offset) {
      std::vector<H> halves(offset + n + 1, H::FromBits(kGuardHalf));
      std::vector<float> floats(offset + n + 1, kGuardFloat);
      std::vector<uint16_t> h_in(n);
      std::vector<uint32_t> f_in(n);
      for (int64_t i = 0; i < n; ++i) {
        h_in[i] = static_cast<uint16_t>(gen());
        f_in[i] = static_cast<uint32_t>(gen());
        halves[offset + i] = H::FromBits(h_in[i]);
      }
      (path.*Ops<H>::kToFloat)(halves.data() + offset, floats.data() + offset, n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(floats[offset + i]), ScalarToFloat<H>(h_in[i]))
            << path.name << " n " << n << " offset " << offset;
      }
      for (int64_t i = 0; i < n; ++i) floats[offset + i] = std::bit_cast<float>(f_in[i]);
      (path.*Ops<H>::kFromFloat)(floats.data() + offset, halves.data() + offset, n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(halves[offset + i].bits, ScalarFromFloat<H>(f_in[i]))
            << path.name << " n " << n << " offset " << offset;
      }
      for (int64_t i = 0; i < offset; ++i) {
        ASSERT_EQ(halves[i].bits, kGuardHalf);
        ASSERT_EQ(floats[i], kGuardFloat);
      }
      ASSERT_EQ(halves[offset + n].bits, kGuardHalf) << "wrote past the end";
      ASSERT_EQ(floats[offset + n], kGuardFloat) << "wrote past the end";
    }
  }
}

class HalfConvertPathTest : public testing::TestWithParam<const HalfConvertPath*> {
 protected:
  void SetUp() override {
    if (!GetParam()->supported()) GTEST_SKIP() << "this CPU lacks what path " << GetParam()->name << " needs";
  }
  const HalfConvertPath& path() const { return *GetParam(); }
};

TEST_P(HalfConvertPathTest, Bf16WidensEveryPattern) { ExpectWidensEveryPattern<BFloat16>(path()); }
TEST_P(HalfConvertPathTest, F16WidensEveryPattern) { ExpectWidensEveryPattern<Float16>(path()); }
TEST_P(HalfConvertPathTest, Bf16RoundsLikeTheScalar) { ExpectRoundsLikeTheScalar<BFloat16>(path()); }
TEST_P(HalfConvertPathTest, F16RoundsLikeTheScalar) { ExpectRoundsLikeTheScalar<Float16>(path()); }
TEST_P(HalfConvertPathTest, Bf16EveryLengthAndOffset) { ExpectEveryLengthAndOffset<BFloat16>(path()); }
TEST_P(HalfConvertPathTest, F16EveryLengthAndOffset) { ExpectEveryLengthAndOffset<Float16>(path()); }

// All 2^32 f32 patterns, a million at a time: about a minute on one core for both paths, so
// the target half_convert_exhaustive_test runs it on demand (tagged manual).
template <class H>
void ExpectRoundsEveryPatternLikeTheScalar(const HalfConvertPath& path) {
  constexpr uint64_t kChunk = 1u << 20;
  std::vector<float> in(kChunk);
  std::vector<H> out(kChunk);
  for (uint64_t x0 = 0; x0 < (uint64_t{1} << 32); x0 += kChunk) {
    for (uint64_t i = 0; i < kChunk; ++i) in[i] = std::bit_cast<float>(static_cast<uint32_t>(x0 + i));
    (path.*Ops<H>::kFromFloat)(in.data(), out.data(), kChunk);
    for (uint64_t i = 0; i < kChunk; ++i) {
      const auto x = static_cast<uint32_t>(x0 + i);
      ASSERT_EQ(out[i].bits, ScalarFromFloat<H>(x)) << path.name << " f32 pattern " << Hex(x);
    }
  }
}

TEST_P(HalfConvertPathTest, Bf16RoundsEveryPatternExhaustive) {
  ExpectRoundsEveryPatternLikeTheScalar<BFloat16>(path());
}
TEST_P(HalfConvertPathTest, F16RoundsEveryPatternExhaustive) { ExpectRoundsEveryPatternLikeTheScalar<Float16>(path()); }

#if defined(__x86_64__)
// The vector instructions round by their immediate, not by MXCSR, and convert f16 denormals
// whatever flush-to-zero and denormals-are-zero say; the scalar functions are integer code.
// The boundaries cover both subnormal ranges (bf16's are f32 denormals).
TEST_P(HalfConvertPathTest, IgnoresTheMxcsrModes) {
  // The inputs are made first: the test's own double arithmetic obeys MXCSR.
  BoundaryInputs<BFloat16>();
  BoundaryInputs<Float16>();
  const unsigned saved = _mm_getcsr();
  for (const unsigned mode : {_MM_ROUND_UP, _MM_ROUND_DOWN, _MM_ROUND_TOWARD_ZERO}) {
    _mm_setcsr((saved & ~(_MM_ROUND_MASK | _MM_FLUSH_ZERO_MASK | _MM_DENORMALS_ZERO_MASK)) | mode | _MM_FLUSH_ZERO_ON |
               _MM_DENORMALS_ZERO_ON);
    ExpectWidensEveryPattern<Float16>(path());
    ExpectWidensEveryPattern<BFloat16>(path());
    ExpectRounds<Float16>(path(), BoundaryInputs<Float16>());
    ExpectRounds<BFloat16>(path(), BoundaryInputs<BFloat16>());
    _mm_setcsr(saved);
    if (HasFatalFailure()) return;
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(Paths, HalfConvertPathTest,
                         testing::ValuesIn(cpu::HalfConvertPaths().begin(), cpu::HalfConvertPaths().end()),
                         [](const testing::TestParamInfo<const HalfConvertPath*>& info) {
                           return std::string(info.param->name);
                         });

TEST(HalfConvert, ChoosesTheLastPathThisCpuRuns) {
  const auto paths = cpu::HalfConvertPaths();
  ASSERT_STREQ(paths.front()->name, "scalar");
  const HalfConvertPath* want = paths.front();
  for (const HalfConvertPath* p : paths) {
    if (p->supported()) want = p;
  }
  EXPECT_EQ(&cpu::ActiveHalfConvertPath(), want);
  EXPECT_STREQ(cpu::HalfConvertPathName(), want->name);
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) {
    EXPECT_STRNE(cpu::HalfConvertPathName(), "scalar");
  }
#endif
}

// The strided forms: unit, broadcast (0), gathered (3, and negative), over more than one block.
template <class H>
void ExpectStridedMatchesTheScalar() {
  std::mt19937 gen(3);
  constexpr int64_t kN = 1000;
  std::vector<H> halves(3 * kN);
  std::vector<float> floats(3 * kN);
  for (auto& h : halves) h = H::FromBits(static_cast<uint16_t>(gen()));
  for (auto& f : floats) f = std::bit_cast<float>(static_cast<uint32_t>(gen()));
  for (const int64_t stride : {1, 0, 3, -1, -3}) {
    const int64_t start = stride < 0 ? 3 * kN - 1 : 0;
    std::vector<float> wide(kN);
    std::vector<H> narrow(kN);
    cpu::HalfToFloat(halves.data() + start, stride, wide.data(), kN);
    cpu::FloatToHalf(floats.data() + start, stride, narrow.data(), kN);
    for (int64_t i = 0; i < kN; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), ScalarToFloat<H>(halves[start + i * stride].bits))
          << "stride " << stride << " at " << i;
      ASSERT_EQ(narrow[i].bits, ScalarFromFloat<H>(std::bit_cast<uint32_t>(floats[start + i * stride])))
          << "stride " << stride << " at " << i;
    }
  }
}

TEST(HalfConvert, Bf16StridedMatchesTheScalar) { ExpectStridedMatchesTheScalar<BFloat16>(); }
TEST(HalfConvert, F16StridedMatchesTheScalar) { ExpectStridedMatchesTheScalar<Float16>(); }

}  // namespace
}  // namespace kiln
