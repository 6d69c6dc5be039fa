#include "backends/cpu/gemm.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/gemm_bf16_amx.h"
#include "backends/cpu/gemm_bf16_avx512.h"
#include "backends/cpu/gemm_choice.h"
#include "backends/cpu/gemm_f32_avx2.h"
#include "backends/cpu/gemm_f32_avx512.h"
#include "tensor/error.h"
#include "tensor/half.h"

namespace kiln::cpu {

#define DECLARE_KERNEL(NS)                                                                                        \
  namespace NS {                                                                                                  \
  void GemmBlockF32(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t r0,       \
                    int64_t rows, int64_t k, int64_t n);                                                          \
  void GemmBlockF64(const double* a, MatrixLayout la, const double* b, MatrixLayout lb, double* c, int64_t r0,    \
                    int64_t rows, int64_t k, int64_t n);                                                          \
  void GemmStridedF32(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t ldc,    \
                      int64_t m, int64_t k, int64_t n, bool accumulate);                                          \
  void GemmStridedF64(const double* a, MatrixLayout la, const double* b, MatrixLayout lb, double* c, int64_t ldc, \
                      int64_t m, int64_t k, int64_t n, bool accumulate);                                          \
  }
DECLARE_KERNEL(avx2)
DECLARE_KERNEL(avx512)
#undef DECLARE_KERNEL

namespace {

// The environment's choice, else the widest the CPU runs.
GemmChoice Decide(bool ask_linux_for_amx) {
  const absl::StatusOr<GemmChoice> c = ChooseGemm(std::getenv("KILN_CPU_GEMM"), DetectGemmFeatures(ask_linux_for_amx));
  if (c.ok()) return *c;
  // Before any tensor exists there is no error path to return through: say so and stop.
  std::fprintf(stderr, "%s\n", std::string(c.status().message()).c_str());
  if (ask_linux_for_amx && !AmxPermission().ok())
    std::fprintf(stderr, "AMX: %s\n", std::string(AmxPermission().message()).c_str());
  std::exit(2);
}

// f32 and f64 matmuls do not ask Linux for the AMX tile state (AmxPermission() says what a grant
// costs the process) unless KILN_CPU_GEMM=amx names it; bf16 matmuls ask on their first call.
const GemmChoice& WideChoice() {
  static const GemmChoice choice = [] {
    const char* forced = std::getenv("KILN_CPU_GEMM");
    return Decide(forced != nullptr && std::string_view(forced) == "amx");
  }();
  return choice;
}

const GemmChoice& Bf16Choice() {
  static const GemmChoice choice = Decide(true);
  return choice;
}

// This thread's scratch, `n` elements from a 64-byte boundary; kept for the thread's next call.
template <class T>
T* Scratch(std::vector<T>& v, int64_t n) {
  constexpr int64_t kSlack = 64 / sizeof(T);
  if (static_cast<int64_t>(v.size()) < n + kSlack) v.resize(n + kSlack);
  void* p = v.data();
  size_t space = v.size() * sizeof(T);
  return static_cast<T*>(std::align(64, n * sizeof(T), p, space));
}

// kiln's own AVX-512 f32 GEMM with this thread's packing buffers.
void GemmF32Avx512(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t ldc, int64_t m,
                   int64_t k, int64_t n, bool accumulate) {
  thread_local std::vector<float> packed_a, packed_b;
  const avx512f32::Scratch scratch{Scratch(packed_a, avx512f32::kPackedA), Scratch(packed_b, avx512f32::PackedB(k, n))};
  avx512f32::Gemm(a, la, b, lb, c, ldc, m, k, n, accumulate, scratch);
}

// kiln's own AVX2 f32 GEMM with this thread's packing buffers.
void GemmF32Avx2(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t ldc, int64_t m,
                 int64_t k, int64_t n, bool accumulate) {
  thread_local std::vector<float> packed_a, packed_b;
  const avx2f32::Scratch scratch{Scratch(packed_a, avx2f32::kPackedA), Scratch(packed_b, avx2f32::PackedB(k, n))};
  avx2f32::Gemm(a, la, b, lb, c, ldc, m, k, n, accumulate, scratch);
}

bool Avx512() { return WideChoice().f32 == F32Kernel::kKilnAvx512; }

using OwnKernel = void (*)(const float*, MatrixLayout, const float*, MatrixLayout, float*, int64_t, int64_t, int64_t,
                           int64_t, bool);

// Each F32Kernel's name (GemmKernel()) and its function: kiln's own, or none for Eigen's AVX2 GEMM.
struct F32KernelEntry {
  F32Kernel kernel;
  const char* name;
  OwnKernel own;
};
constexpr F32KernelEntry kF32Kernels[] = {{F32Kernel::kKilnAvx512, "avx512", GemmF32Avx512},
                                          {F32Kernel::kKilnAvx2, "kiln-avx2", GemmF32Avx2},
                                          {F32Kernel::kEigenAvx2, "avx2", nullptr}};

const F32KernelEntry& ChosenF32Kernel() {
  for (const F32KernelEntry& e : kF32Kernels) {
    if (e.kernel == WideChoice().f32) return e;
  }
  return kF32Kernels[std::size(kF32Kernels) - 1];  // not reached: every F32Kernel is listed
}

OwnKernel OwnF32Kernel() { return ChosenF32Kernel().own; }

}  // namespace

// f32 runs kiln's own kernels (AVX-512, else AVX2: faster than Eigen's at the GPT's shapes, the
// same bits whatever the thread count, and C written without a zero-fill first) unless
// KILN_CPU_GEMM=avx2 asks for Eigen's AVX2 GEMM; f64 runs Eigen's.
void GemmBlock(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t r0, int64_t rows,
               int64_t k, int64_t n) {
  if (const OwnKernel own = OwnF32Kernel()) {
    own(a + r0 * (la.row_major ? la.ld : 1), la, b, lb, c + r0 * n, n, rows, k, n, false);
    return;
  }
  avx2::GemmBlockF32(a, la, b, lb, c, r0, rows, k, n);
}

void GemmBlock(const double* a, MatrixLayout la, const double* b, MatrixLayout lb, double* c, int64_t r0, int64_t rows,
               int64_t k, int64_t n) {
  (Avx512() ? avx512::GemmBlockF64 : avx2::GemmBlockF64)(a, la, b, lb, c, r0, rows, k, n);
}

void Gemm(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t ldc, int64_t m, int64_t k,
          int64_t n, bool accumulate) {
  if (const OwnKernel own = OwnF32Kernel()) {
    own(a, la, b, lb, c, ldc, m, k, n, accumulate);
    return;
  }
  avx2::GemmStridedF32(a, la, b, lb, c, ldc, m, k, n, accumulate);
}

void Gemm(const double* a, MatrixLayout la, const double* b, MatrixLayout lb, double* c, int64_t ldc, int64_t m,
          int64_t k, int64_t n, bool accumulate) {
  (Avx512() ? avx512::GemmStridedF64 : avx2::GemmStridedF64)(a, la, b, lb, c, ldc, m, k, n, accumulate);
}

void GemmBlock(const BFloat16* a, MatrixLayout la, const BFloat16* b, MatrixLayout lb, BFloat16* c, int64_t r0,
               int64_t rows, int64_t k, int64_t n) {
  GemmBlock(a, la, b, lb, c, r0, rows, k, n, 0, n);
}

void GemmBlock(const BFloat16* a, MatrixLayout la, const BFloat16* b, MatrixLayout lb, BFloat16* c, int64_t r0,
               int64_t rows, int64_t k, int64_t n, int64_t c0, int64_t cols) {
  static_assert(sizeof(BFloat16) == sizeof(uint16_t));
  // The kernels see columns [c0, c0 + cols) as a C `cols` wide, its rows still n apart.
  const auto* a16 = reinterpret_cast<const uint16_t*>(a);
  const auto* b16 = reinterpret_cast<const uint16_t*>(b) + c0 * (lb.row_major ? 1 : lb.ld);
  auto* c16 = reinterpret_cast<uint16_t*>(c) + c0;
  const int64_t ldc = n;
  switch (Bf16Choice().bf16) {
    case Bf16Kernel::kAmx: {
      thread_local std::vector<uint16_t> packed_a, packed_b;
      thread_local std::vector<float> partials;
      const int64_t partial_rows = std::min((rows + amx::kMR - 1) / amx::kMR * amx::kMR, amx::kMO);
      const amx::Scratch scratch{Scratch(packed_a, amx::kPackedA), Scratch(packed_b, amx::kPackedB),
                                 k > amx::kKC ? Scratch(partials, partial_rows * amx::kNC) : nullptr};
      amx::GemmBlockBf16(a16, la, b16, lb, c16, ldc, r0, rows, k, cols, scratch);
      return;
    }
    case Bf16Kernel::kAvx512Bf16: {
      namespace k16 = avx512bf16;
      thread_local std::vector<uint32_t> packed_a, packed_b;
      thread_local std::vector<float> partials;
      const k16::Scratch scratch{Scratch(packed_a, k16::kPackedA), Scratch(packed_b, k16::kPackedB),
                                 k > k16::kKC ? Scratch(partials, std::min(rows, k16::kMO) * k16::kNC) : nullptr};
      k16::GemmBlockBf16(a16, la, b16, lb, c16, ldc, r0, rows, k, cols, scratch);
      return;
    }
    case Bf16Kernel::kWidenToF32: break;
  }
  throw Error(absl::InternalError("the bf16 GEMM kernel was called where it is not chosen (NativeBf16Gemm())"));
}

const char* GemmKernel() { return ChosenF32Kernel().name; }

bool NativeBf16Gemm() { return Bf16Choice().bf16 != Bf16Kernel::kWidenToF32; }

const char* Bf16GemmKernel() {
  switch (Bf16Choice().bf16) {
    case Bf16Kernel::kAmx: return "amx";
    case Bf16Kernel::kAvx512Bf16: return "avx512bf16";
    case Bf16Kernel::kWidenToF32: break;
  }
  return "f32";
}

}  // namespace kiln::cpu
