// kiln's f32 GEMMs (gemm.h: the one the CPU backend picked, and each of kiln's own kernels the
// CPU runs, called directly: AVX2 everywhere, AVX-512 where the CPU has it) against a
// double-precision triple loop: every layout pair, odd sizes around and past the register and
// cache blocks, leading dimensions wider than the matrices, C written and C accumulated into;
// and, for kiln's own kernels (Eigen's AVX2 GEMM, which KILN_CPU_GEMM=avx2 picks, makes no such
// promise), a result that does not depend on how the rows are split (row blocks, and Tensor
// matmul on 1 or 2 threads).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/gemm_choice.h"
#include "backends/cpu/gemm_f32_avx2.h"
#include "backends/cpu/gemm_f32_avx512.h"

namespace kiln::cpu {
namespace {

constexpr float kSentinel = -12345.0f;

// C (m x n, rows ldc apart) = A B, or += A B: one of the kernels under test.
using GemmFn = std::function<void(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c,
                                  int64_t ldc, int64_t m, int64_t k, int64_t n, bool accumulate)>;

// A kernel of its own namespace, called directly with buffers of the sizes its header asks for.
template <class Scratch, auto kGemm>
GemmFn Direct(int64_t packed_a, int64_t (*packed_b)(int64_t, int64_t)) {
  return [=](const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t ldc, int64_t m,
             int64_t k, int64_t n, bool accumulate) {
    std::vector<float> pa(packed_a + 16), pb(packed_b(k, n) + 16);
    auto aligned = [](std::vector<float>& v) {
      return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(v.data()) + 63) / 64 * 64);
    };
    kGemm(a, la, b, lb, c, ldc, m, k, n, accumulate, Scratch{aligned(pa), aligned(pb)});
  };
}

struct Kernel {
  std::string name;
  GemmFn gemm;
  bool same_bits_for_any_split;
};

// Whether the backend's choice is one of kiln's kernels (not Eigen's AVX2 GEMM).
bool ChoseOwnKernel() { return std::string(GemmKernel()) != "avx2"; }

// The backend's choice, and kiln's own kernels that this CPU runs.
std::vector<Kernel> Kernels() {
  std::vector<Kernel> out = {
      {std::string("chosen: ") + GemmKernel(), [](auto... args) { Gemm(args...); }, ChoseOwnKernel()},
      {"kiln-avx2",
       Direct<avx2f32::Scratch, avx2f32::Gemm>(
           avx2f32::kPackedA, +[](int64_t k, int64_t n) { return avx2f32::PackedB(k, n); }),
       true}};
  if (DetectGemmFeatures(false).avx512) {
    out.push_back({"avx512f32",
                   Direct<avx512f32::Scratch, avx512f32::Gemm>(
                       avx512f32::kPackedA, +[](int64_t k, int64_t n) { return avx512f32::PackedB(k, n); }),
                   true});
  }
  return out;
}

// An m x k (or k x n) operand in either layout, its leading dimension `pad` past the width.
struct Matrix {
  int64_t rows, cols;
  MatrixLayout layout;
  std::vector<float> data;
  Matrix(int64_t r, int64_t c, bool row_major, int64_t pad, std::mt19937& gen)
      : rows(r), cols(c), layout{row_major, (row_major ? c : r) + pad} {
    std::uniform_real_distribution<float> u(-1, 1);
    data.assign(layout.ld * (row_major ? r : c), kSentinel);
    for (int64_t i = 0; i < r; ++i) {
      for (int64_t j = 0; j < c; ++j) at(i, j) = u(gen);
    }
  }
  float& at(int64_t i, int64_t j) { return row_major() ? data[i * layout.ld + j] : data[j * layout.ld + i]; }
  bool row_major() const { return layout.row_major; }
};

struct Shape {
  int64_t m, k, n;
};

// C (ldc = n + 3, the 3 past n must stay untouched) = A B or C += A B, checked element by
// element within the error bound of a k-term f32 sum: k * 2^-24 * sum |terms|, doubled.
void ExpectMatchesDouble(const GemmFn& gemm, Shape s, bool ra, bool rb, bool accumulate, std::mt19937& gen) {
  Matrix a(s.m, s.k, ra, 5, gen), b(s.k, s.n, rb, 7, gen);
  const int64_t ldc = s.n + 3;
  std::vector<float> c(s.m * ldc, kSentinel), c0(s.m * ldc);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) c[i * ldc + j] = accumulate ? u(gen) : kSentinel;
  }
  c0 = c;
  gemm(a.data.data(), a.layout, b.data.data(), b.layout, c.data(), ldc, s.m, s.k, s.n, accumulate);
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      if (j >= s.n) {
        ASSERT_EQ(c[i * ldc + j], kSentinel) << "wrote past n at " << i << "," << j;
        continue;
      }
      double want = accumulate ? c0[i * ldc + j] : 0, magnitude = std::abs(want);
      for (int64_t p = 0; p < s.k; ++p) {
        const double term = double(a.at(i, p)) * double(b.at(p, j));
        want += term;
        magnitude += std::abs(term);
      }
      ASSERT_NEAR(c[i * ldc + j], want, 2 * (s.k + 1) * std::ldexp(magnitude, -24))
          << "m,k,n " << s.m << "," << s.k << "," << s.n << " at " << i << "," << j;
    }
  }
}

std::vector<Shape> Shapes() {
  std::vector<Shape> shapes;
  // m = 13 and 20 end in panels of 4 + 3 and 4 + 4 rows (gemm_f32_avx2.cc's PanelRows).
  for (int64_t m : {1, 13, 15, 17, 20, 33, 47}) {
    for (int64_t k : {1, 15, 17, 33, 47}) {
      for (int64_t n : {1, 15, 17, 33, 47}) shapes.push_back({m, k, n});
    }
  }
  // Past the cache blocks: rows (AVX-512 196, AVX2 144), depth (384 and 256: 2 and 3 blocks) and
  // width (768 and 256); no depth.
  for (Shape s : {Shape{100, 257, 100}, Shape{257, 100, 65}, Shape{257, 600, 33}, Shape{20, 1200, 40},
                  Shape{3, 5, 2100}, Shape{5, 0, 17}}) {
    shapes.push_back(s);
  }
  return shapes;
}

TEST(GemmF32, MatchesDoubleInEveryLayoutWrittenOrAccumulated) {
  std::mt19937 gen(11);
  for (const Kernel& kernel : Kernels()) {
    SCOPED_TRACE(kernel.name);
    for (bool ra : {true, false}) {
      for (bool rb : {true, false}) {
        for (bool accumulate : {false, true}) {
          SCOPED_TRACE(std::string(ra ? "A row-major" : "A column-major") +
                       (rb ? ", B row-major" : ", B column-major") + (accumulate ? ", C +=" : ", C ="));
          for (Shape s : Shapes()) ExpectMatchesDouble(kernel.gemm, s, ra, rb, accumulate, gen);
        }
      }
    }
  }
}

// C from one call per block of rows, for the splits of `m` rows at `cuts` (as GemmBlock cuts).
std::vector<float> ProductSplitAt(const GemmFn& gemm, const Matrix& a, const Matrix& b,
                                  const std::vector<int64_t>& cuts) {
  const int64_t m = a.rows, k = a.cols, n = b.cols;
  std::vector<float> c(m * n, kSentinel);
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const int64_t r0 = cuts[i];
    gemm(a.data.data() + r0 * (a.row_major() ? a.layout.ld : 1), a.layout, b.data.data(), b.layout, c.data() + r0 * n,
         n, cuts[i + 1] - r0, k, n, false);
  }
  return c;
}

// Each element's k-sum runs in one fixed order, whichever rows a thread gets: every split gives
// the same bits as one call.
TEST(GemmF32Splits, RowBlocksGiveTheSameBits) {
  std::mt19937 gen(5);
  for (const Kernel& kernel : Kernels()) {
    if (!kernel.same_bits_for_any_split) continue;
    SCOPED_TRACE(kernel.name);
    for (bool ra : {true, false}) {
      for (bool rb : {true, false}) {
        SCOPED_TRACE(std::string(ra ? "A row-major" : "A column-major") + (rb ? ", B row-major" : ", B column-major"));
        const Matrix a(301, 700, ra, 3, gen), b(700, 77, rb, 1, gen);
        const std::vector<float> whole = ProductSplitAt(kernel.gemm, a, b, {0, 301});
        for (const std::vector<int64_t>& cuts : std::vector<std::vector<int64_t>>{
                 {0, 1, 301}, {0, 13, 150, 151, 301}, {0, 197, 301}, {0, 100, 200, 300, 301}}) {
          const std::vector<float> split = ProductSplitAt(kernel.gemm, a, b, cuts);
          for (size_t i = 0; i < whole.size(); ++i) {
            ASSERT_EQ(std::memcmp(&whole[i], &split[i], sizeof(float)), 0)
                << "element " << i << " differs with " << cuts.size() - 1 << " row blocks: " << whole[i] << " vs "
                << split[i];
          }
        }
      }
    }
  }
}

// The same through Tensor matmul and Linear, where the rows (or, for an output at least as wide
// as it is tall, the columns) go to the device's threads: 1 thread and 2 give the same bits.
TEST(GemmF32Splits, MatmulAndLinearOnOneOrTwoThreadsGiveTheSameBits) {
  if (!ChoseOwnKernel()) GTEST_SKIP() << "Eigen's AVX2 GEMM: its sums depend on the thread count";
  Generator gen(2);
  // Tall (row blocks) and wide (column blocks, with a last block narrower than the others).
  for (auto [m, k, n] : {std::array<int64_t, 3>{301, 700, 77}, std::array<int64_t, 3>{40, 300, 500}}) {
    SCOPED_TRACE(absl::StrCat(m, " x ", k, " x ", n));
    const CpuTensor a = CpuTensor::uniform({m, k}, -1, 1, gen), b = CpuTensor::uniform({n, k}, -1, 1, gen);
    const CpuTensor bias = CpuTensor::uniform({n}, -1, 1, gen);
    std::vector<TensorData> products, linears;
    for (int threads : {1, 2}) {
      ASSERT_TRUE(Configure({.devices = 1, .threads_per_device = threads}).ok());
      products.push_back(a.matmul(b.transpose(0, 1)).to_data());
      linears.push_back(CpuTensor(Cpu::linear(a.primitive(), b.primitive(), &bias.primitive())).to_data());
    }
    for (const auto& results : {products, linears}) {
      const absl::Span<const float> one = results[0].values<float>(), two = results[1].values<float>();
      ASSERT_EQ(one.size(), two.size());
      EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
