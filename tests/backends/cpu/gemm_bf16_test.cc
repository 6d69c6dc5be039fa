// The bf16 GEMM kernels (backends/cpu/gemm_bf16_amx.h: AMX tiles, gemm_bf16_avx512.h:
// vdpbf16ps) against sums in double over shapes past every tile, register and cache block of
// both, in every layout; vdpbf16ps against a scalar model of it bit for bit; a matmul identical
// on 1, 2 and 3 threads; and matmul taking the kernel exactly where the CPU (and Linux, for
// AMX) and KILN_CPU_GEMM say. The BUILD file runs it as the machine chooses, forced to amx,
// forced to avx512bf16 and forced to avx2 (where bf16 widens to f32).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/gemm_choice.h"
#include "tensor/half.h"

namespace kiln::cpu {
namespace {

bool CpuHasBf16() { return DetectGemmFeatures(false).avx512_bf16; }
// AMX on the CPU and granted by Linux.
bool CpuRunsAmx() { return DetectGemmFeatures(true).amx_permitted; }

std::string Forced() {
  const char* forced = std::getenv("KILN_CPU_GEMM");
  return forced != nullptr ? forced : "";
}

// Why the CPU cannot run `kernel` ("amx" or "avx512bf16"); empty where it can.
std::string CpuLacks(const std::string& kernel) {
  if (kernel == "amx" && !CpuRunsAmx()) {
    return DetectGemmFeatures(false).amx_bf16 ? std::string(AmxPermission().message())
                                              : "this CPU lacks AMX-BF16 (amx_tile, amx_bf16)";
  }
  if (!CpuHasBf16()) return "this CPU lacks AVX-512 BF16 (avx512_bf16): bf16 matmuls widen to f32 here";
  return "";
}

// The kernel this process must run, from the CPU and KILN_CPU_GEMM alone.
std::string ExpectedKernel() {
  const std::string forced = Forced();
  if (forced.empty()) return CpuRunsAmx() ? "amx" : CpuHasBf16() ? "avx512bf16" : "f32";
  return forced == "amx" || forced == "avx512bf16" ? forced : "f32";
}

// Why this process does not run a bf16 kernel; empty where it does. Asking for one on a CPU
// without it stops the process at the first matmul (ForcedOnACpuWithoutItStops checks that).
std::string WhyNoKernel() {
  const std::string kernel = ExpectedKernel();
  if (kernel == "f32") {
    return CpuHasBf16() ? "KILN_CPU_GEMM=" + Forced() + " chooses the f32 path for bf16" : CpuLacks("avx512bf16");
  }
  return CpuLacks(kernel);
}

std::vector<BFloat16> Random(int64_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<BFloat16> v(count);
  for (BFloat16& x : v) x = BFloat16(u(gen));
  return v;
}

// An m x k and a k x n operand in the given layouts, with `pad` unused elements after each row
// (row-major) or column (column-major).
struct Problem {
  int64_t m, n, k;
  bool a_row_major, b_row_major;
  int64_t pad = 0;
  std::vector<BFloat16> a, b;
  MatrixLayout la, lb;

  Problem(int64_t m_, int64_t n_, int64_t k_, bool ra, bool rb, int64_t pad_ = 0)
      : m(m_), n(n_), k(k_), a_row_major(ra), b_row_major(rb), pad(pad_) {
    la = {ra, (ra ? k : m) + pad};
    lb = {rb, (rb ? n : k) + pad};
    a = Random(la.ld * (ra ? m : k), 11 + m * 7 + k);
    b = Random(lb.ld * (rb ? k : n), 23 + n * 5 + k);
  }
  float A(int64_t i, int64_t p) const { return float(a_row_major ? a[i * la.ld + p] : a[p * la.ld + i]); }
  float B(int64_t p, int64_t j) const { return float(b_row_major ? b[p * lb.ld + j] : b[j * lb.ld + p]); }

  // The kernel's C, its rows in two calls (as two threads would split them).
  std::vector<BFloat16> Run() const {
    std::vector<BFloat16> c(m * n, BFloat16(-7.0f));
    const int64_t split = m / 3;
    GemmBlock(a.data(), la, b.data(), lb, c.data(), 0, split, k, n);
    GemmBlock(a.data(), la, b.data(), lb, c.data(), split, m - split, k, n);
    return c;
  }
  // The same C from column blocks (as matmul splits wide products), at an odd split too.
  std::vector<BFloat16> RunByColumns(int64_t split) const {
    std::vector<BFloat16> c(m * n, BFloat16(-7.0f));
    GemmBlock(a.data(), la, b.data(), lb, c.data(), 0, m, k, n, 0, split);
    GemmBlock(a.data(), la, b.data(), lb, c.data(), 0, m, k, n, split, n - split);
    return c;
  }
  std::string Name() const {
    return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
           (a_row_major ? " A row-major" : " A column-major") + (b_row_major ? ", B row-major" : ", B column-major") +
           (pad ? ", padded" : "");
  }
};

// m, n, k: ones, odd k, edges of vdpbf16ps's 12 x 32 register block and of AMX's 16 x 16 tiles
// (32 x 32 block, 32 values of k a tile), k past one and several k blocks (256 for vdpbf16ps,
// 512 for AMX), n past the 512-column block, m past the 192- and 256-row blocks and the
// 1024-row pass.
const std::vector<std::array<int64_t, 3>> kShapes = {
    {1, 1, 1},     {1, 37, 1},      {5, 1, 7},     {12, 32, 2},    {13, 33, 3},   {11, 31, 255},
    {24, 64, 256}, {25, 65, 257},   {3, 5, 1000},  {200, 47, 129}, {7, 530, 300}, {1030, 33, 301},
    {16, 16, 32},  {17, 15, 31},    {32, 32, 33},  {33, 48, 64},   {31, 17, 511}, {40, 70, 512},
    {48, 20, 513}, {257, 40, 1030}, {2, 1030, 40}, {64, 96, 1600},
};

TEST(Bf16Gemm, WithinTheBoundOfAnF32SumRoundedOnce) {
  if (const std::string why = WhyNoKernel(); !why.empty()) GTEST_SKIP() << why;
  for (const auto& [m, n, k] : kShapes) {
    for (bool ra : {true, false}) {
      for (bool rb : {true, false}) {
        const Problem pr(m, n, k, ra, rb, m % 2 ? 3 : 0);
        SCOPED_TRACE(pr.Name());
        const std::vector<BFloat16> c = pr.Run();
        // The f32 sum s of k exact products is within gamma_k * sum |a b| of the exact value
        // (any order); rounding s to bf16 adds at most 2^-8 |s|.
        const double gamma = k * 0x1p-24 / (1 - k * 0x1p-24);
        int64_t failures = 0;
        for (int64_t i = 0; i < m && failures < 5; ++i) {
          for (int64_t j = 0; j < n && failures < 5; ++j) {
            double exact = 0, magnitude = 0;
            for (int64_t p = 0; p < k; ++p) {
              const double prod = double(pr.A(i, p)) * double(pr.B(p, j));
              exact += prod;
              magnitude += std::abs(prod);
            }
            const double f32_error = gamma * magnitude + k * 0x1p-52 * magnitude;  // the latter: double's own
            const double bound = 0x1p-8 * (std::abs(exact) + f32_error) + f32_error;
            const double got = float(c[i * n + j]);
            if (!(std::abs(got - exact) <= bound)) {
              ++failures;
              ADD_FAILURE() << "C[" << i << "," << j << "] = " << got << ", exact " << exact << ", bound " << bound;
            }
          }
        }
      }
    }
  }
}

// vdpbf16ps as documented: per k pair, the odd k's product added first, each addition rounded
// to f32 (products of bf16 are exact); then one rounding to bf16. Denormals do not occur here.
float ModelSum(const Problem& pr, int64_t i, int64_t j) {
  float acc = 0;
  for (int64_t p = 0; p < pr.k; p += 2) {
    if (p + 1 < pr.k) acc += pr.A(i, p + 1) * pr.B(p + 1, j);
    acc += pr.A(i, p) * pr.B(p, j);
  }
  return acc;
}

TEST(Bf16Gemm, SumsInTheInstructionsOrderWhateverTheBlocking) {
  if (const std::string why = WhyNoKernel(); !why.empty()) GTEST_SKIP() << why;
  if (ExpectedKernel() != "avx512bf16") {
    GTEST_SKIP() << "the model is vdpbf16ps's: TDPBF16PS adds in an order of its own (BitIdenticalOnAnyThreadCount "
                    "checks that it is fixed)";
  }
  for (const auto& [m, n, k] : kShapes) {
    for (bool ra : {true, false}) {
      for (bool rb : {true, false}) {
        const Problem pr(m, n, k, ra, rb);
        SCOPED_TRACE(pr.Name());
        const std::vector<BFloat16> c = pr.Run();
        int64_t failures = 0;
        for (int64_t i = 0; i < m && failures < 5; ++i) {
          for (int64_t j = 0; j < n && failures < 5; ++j) {
            const BFloat16 want(ModelSum(pr, i, j));
            if (!(c[i * n + j] == want)) {
              ++failures;
              ADD_FAILURE() << "C[" << i << "," << j << "] = " << float(c[i * n + j]) << ", the model " << float(want);
            }
          }
        }
      }
    }
  }
}

TEST(Bf16Gemm, ColumnBlocksGiveTheSameBits) {
  if (const std::string why = WhyNoKernel(); !why.empty()) GTEST_SKIP() << why;
  for (const auto& [m, n, k] : kShapes) {
    for (bool ra : {true, false}) {
      for (bool rb : {true, false}) {
        const Problem pr(m, n, k, ra, rb, 1);
        SCOPED_TRACE(pr.Name());
        const std::vector<BFloat16> rows = pr.Run();
        for (int64_t split : {n / 2 / 32 * 32, n / 3}) {
          const std::vector<BFloat16> cols = pr.RunByColumns(split);
          for (int64_t i = 0; i < m * n; ++i) {
            if (rows[i].bits != cols[i].bits) {
              ADD_FAILURE() << "split at column " << split << ": C[" << i / n << "," << i % n
                            << "] = " << float(cols[i]) << ", by rows " << float(rows[i]);
              break;
            }
          }
        }
      }
    }
  }
}

TEST(Bf16Gemm, RoundsAsHalfHDoesWithInfinitiesAndNaNs) {
  if (const std::string why = WhyNoKernel(); !why.empty()) GTEST_SKIP() << why;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float big = float(BFloat16::FromBits(0x7f7f));  // the largest bf16
  // k = 2: C = a0 b0 + a1 b1 over every pair of these rows and columns; ties of bf16 rounding
  // (1 + 2^-8, 1 + 3 * 2^-8), overflow past the largest bf16, and inf - inf.
  const std::vector<std::array<float, 2>> rows = {{1, 1}, {1, -1}, {inf, 1}, {nan, 0}, {big, big}, {-0.0f, 0}};
  const std::vector<std::array<float, 2>> cols = {{1, 0x1p-8f}, {1, 3 * 0x1p-8f}, {1, 1}, {-inf, 2}, {0, -1}};
  const int64_t m = rows.size(), n = cols.size();
  std::vector<BFloat16> a, b(2 * n), c(m * n);
  for (const auto& r : rows) a.insert(a.end(), {BFloat16(r[0]), BFloat16(r[1])});
  for (int64_t j = 0; j < n; ++j) {
    b[j] = BFloat16(cols[j][0]);
    b[n + j] = BFloat16(cols[j][1]);
  }
  GemmBlock(a.data(), {true, 2}, b.data(), {true, n}, c.data(), 0, m, 2, n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const float r0 = float(a[2 * i]) * float(b[j]), r1 = float(a[2 * i + 1]) * float(b[n + j]);
      const float s = 0.0f + r1 + r0;  // odd k first
      const BFloat16 want(s), got = c[i * n + j];
      if (std::isnan(s)) {
        EXPECT_TRUE(std::isnan(float(got))) << i << "," << j;
      } else {
        EXPECT_EQ(got.bits & 0x7fff ? got.bits : 0, want.bits & 0x7fff ? want.bits : 0)
            << i << "," << j << ": " << float(got) << " against " << float(want);
      }
    }
  }
}

// A denormal bf16 times 2^100 is 2^-29 in f32 arithmetic and 0 through vdpbf16ps (denormal
// inputs count as zero), so the result tells which path a matmul took.
float DenormalTimesBig() {
  const CpuTensor a = CpuTensor::from_vector(std::vector<BFloat16>{BFloat16::FromBits(0x0010)}, {1, 1});
  const CpuTensor b = CpuTensor::from_vector(std::vector<BFloat16>{BFloat16(0x1p100f)}, {1, 1});
  return static_cast<float>(a.matmul(b).to_data().values<BFloat16>()[0]);
}

TEST(Bf16GemmChoice, TheKernelIsTheEnvironmentsOrTheCpus) {
  const std::string kernel = ExpectedKernel();
  if (kernel != "f32" && !CpuLacks(kernel).empty())
    GTEST_SKIP() << "KILN_CPU_GEMM=" << kernel << ": " << CpuLacks(kernel);
  const bool native = kernel != "f32";
  EXPECT_EQ(NativeBf16Gemm(), native);
  EXPECT_EQ(std::string(Bf16GemmKernel()), kernel);
  // vdpbf16ps and TDPBF16PS both treat denormal inputs as zero.
  EXPECT_EQ(DenormalTimesBig(), native ? 0.0f : 0x1p-29f);
}

TEST(Bf16GemmChoice, AmxTakenOnACpuWithIt) {
  if (const std::string lacks = CpuLacks("amx"); !lacks.empty()) GTEST_SKIP() << lacks;
  if (!Forced().empty() && Forced() != "amx") GTEST_SKIP() << "KILN_CPU_GEMM=" << Forced() << " says otherwise";
  EXPECT_STREQ(Bf16GemmKernel(), "amx");
  EXPECT_EQ(DenormalTimesBig(), 0.0f) << "a bf16 matmul did not run a bf16 kernel";
}

TEST(Bf16GemmChoice, Avx512Bf16TakenOnACpuWithItButNotAmx) {
  if (const std::string lacks = CpuLacks("avx512bf16"); !lacks.empty()) GTEST_SKIP() << lacks;
  if (Forced().empty() && CpuRunsAmx()) GTEST_SKIP() << "AMX comes first on this CPU";
  if (!Forced().empty() && Forced() != "avx512bf16") GTEST_SKIP() << "KILN_CPU_GEMM=" << Forced() << " says otherwise";
  EXPECT_STREQ(Bf16GemmKernel(), "avx512bf16");
  EXPECT_EQ(DenormalTimesBig(), 0.0f) << "a bf16 matmul did not run the bf16 kernel";
}

TEST(Bf16GemmChoice, ForcedOnACpuWithoutItStops) {
  const std::string forced = Forced();
  if ((forced != "avx512bf16" && forced != "amx") || CpuLacks(forced).empty()) {
    GTEST_SKIP() << "needs KILN_CPU_GEMM=avx512bf16 or amx on a CPU without it";
  }
  const std::string lacks = forced == "amx" ? "(this CPU lacks AMX-BF16|Linux refused this process AMX tile data.*)"
                                            : "this CPU lacks AVX-512 BF16";
  EXPECT_EXIT(NativeBf16Gemm(), ::testing::ExitedWithCode(2),
              "KILN_CPU_GEMM=" + forced + ": expected kiln-avx2, avx2, avx512, avx512bf16 or amx \\(" + lacks + "\\)");
}

// Batched and broadcast operands, transposed views, one thread and several: the same bits.
TEST(Bf16Matmul, BitIdenticalOnAnyThreadCount) {
  if (const std::string why = WhyNoKernel(); !why.empty()) GTEST_SKIP() << why;
  Generator gen(5);
  const CpuTensor a = CpuTensor::uniform({301, 517}, -1, 1, gen, DType::kBF16);
  const CpuTensor b = CpuTensor::uniform({517, 203}, -1, 1, gen, DType::kBF16);
  const CpuTensor x = CpuTensor::uniform({2, 150, 300}, -1, 1, gen, DType::kBF16);
  const CpuTensor w = CpuTensor::uniform({70, 300}, -1, 1, gen, DType::kBF16);
  const auto products = [&] {
    std::vector<std::vector<uint16_t>> bits;
    for (const CpuTensor& t : {a.matmul(b), x.matmul(w.transpose(0, 1)), a.transpose(0, 1).matmul(a)}) {
      const TensorData data = t.to_data();
      bits.emplace_back();
      for (BFloat16 v : data.values<BFloat16>()) bits.back().push_back(v.bits);
    }
    return bits;
  };
  ASSERT_TRUE(Configure({.devices = 1, .threads_per_device = 1}).ok());
  const std::vector<std::vector<uint16_t>> one = products();
  for (int threads : {2, 3}) {
    ASSERT_TRUE(Configure({.devices = 1, .threads_per_device = threads}).ok());
    const std::vector<std::vector<uint16_t>> many = products();
    for (size_t p = 0; p < one.size(); ++p) {
      for (size_t i = 0; i < one[p].size(); ++i) {
        if (one[p][i] != many[p][i]) {
          ADD_FAILURE() << "product " << p << ", element " << i << ": " << one[p][i] << " on 1 thread, " << many[p][i]
                        << " on " << threads;
          break;
        }
      }
    }
  }
  ASSERT_TRUE(Configure({}).ok());
}

// Batches through matmul (cpu_backend's split), against sums in double, in bf16's precision.
TEST(Bf16Matmul, BatchedAndBroadcastMatchDouble) {
  // A forced kernel the CPU lacks stops the first matmul of any dtype (ForcedOnACpuWithoutItStops).
  const std::string forced = Forced();
  if ((forced == "amx" || forced == "avx512bf16") && !CpuLacks(forced).empty()) {
    GTEST_SKIP() << "KILN_CPU_GEMM=" << forced << ": " << CpuLacks(forced);
  }
  Generator gen(9);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 20, 50}, {50, 30}}, {{2, 1, 17, 40}, {3, 40, 9}}, {{4, 33, 300}, {4, 300, 65}}};
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE(sa.ToString() + " x " + sb.ToString());
    const CpuTensor a = CpuTensor::uniform(sa, -1, 1, gen, DType::kBF16);
    const CpuTensor b = CpuTensor::uniform(sb, -1, 1, gen, DType::kBF16);
    const CpuTensor want = a.to(DType::kF64).matmul(b.to(DType::kF64));
    const CpuTensor got = a.matmul(b);
    ASSERT_EQ(got.shape(), want.shape());
    const TensorData g = got.to_data(), w = want.to_data();
    const int64_t k = sa[sa.rank() - 1];
    for (int64_t i = 0; i < g.numel(); ++i) {
      // |a|, |b| < 1: sum |a b| < k.
      ASSERT_NEAR(g.AsDouble(i), w.AsDouble(i), 0x1p-8 * std::abs(w.AsDouble(i)) + 2 * k * k * 0x1p-24) << i;
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
