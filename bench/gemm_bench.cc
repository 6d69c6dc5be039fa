// kiln's f32 GEMM against Eigen's, side by side in one run, at the GPT's and the MLP's shapes and
// square ones, in every layout pair, on 1 and 2 threads. Four ways to run each product:
//  - eigen:  Eigen's GEMM built for the CPU's widest ISA, AVX-512 or AVX2 (what GemmBlock ran
//            before kiln had its own kernels), one call per thread on the row blocks matmul.cc cuts;
//  - kiln:   cpu::GemmBlock (the backend's choice: kiln's own AVX-512 kernel, else its AVX2 one)
//            on the same row blocks;
//  - kiln_avx2: kiln's own AVX2 kernel (KILN_CPU_GEMM=kiln-avx2) on the same row blocks;
//  - tensor: Tensor matmul on views of the same layouts (threading and all).
// Run with --benchmark_enable_random_interleaving=true --benchmark_repetitions=N and take the
// medians (bench/gemm_table.py). Every figure is GFLOPS of wall time and of process CPU time.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/gemm_f32_avx2.h"

// Eigen's builds (backends/cpu/gemm_avx512.cc, gemm_avx2.cc), the peers.
namespace kiln::cpu::avx512 {
void GemmBlockF32(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t r0, int64_t rows,
                  int64_t k, int64_t n);
}  // namespace kiln::cpu::avx512
namespace kiln::cpu::avx2 {
void GemmBlockF32(const float* a, MatrixLayout la, const float* b, MatrixLayout lb, float* c, int64_t r0, int64_t rows,
                  int64_t k, int64_t n);
}  // namespace kiln::cpu::avx2

namespace kiln {
namespace {

struct GemmShape {
  const char* name;
  int64_t m, k, n;
};

// The GPT's (width 384, 8 x 128 tokens): forward x W^T, backward dX = dY W, dW = dY^T X; one
// head's attention scores Q K^T and W V (default: context 64, head 32; larger: 256, 64); the
// MLP's first layer (784 -> 256) at one device's batch of 64 and a half of it, forward and dW; the
// default GPT's (width 128, 32 x 64 tokens, d_*): its qkv, its second MLP layer and qkv's dW.
constexpr GemmShape kShapes[] = {
    {"qkv", 1024, 384, 1152},     {"mlp_up", 1024, 384, 1536},  {"proj", 1024, 384, 256},
    {"dx_qkv", 1024, 1152, 384},  {"dx_mlp", 1024, 1536, 384},  {"dw_mlp", 1536, 2048, 384},
    {"att_qk64", 64, 32, 64},     {"att_qk256", 256, 64, 256},  {"att_wv256", 256, 256, 64},
    {"sq256", 256, 256, 256},     {"sq1024", 1024, 1024, 1024}, {"mlp_fc1_64", 64, 784, 256},
    {"mlp_fc1_32", 32, 784, 256}, {"mlp_dw1_32", 256, 32, 784}, {"d_qkv", 2048, 128, 384},
    {"d_fc2", 2048, 512, 128},    {"d_dw_qkv", 384, 2048, 128}, {"mlp_dx1_32", 32, 256, 784},
    {"mlp_fc2_32", 32, 256, 256}, {"mlp_dw2_32", 256, 32, 256}, {"mlp_fc3_32", 32, 256, 10},
    {"mlp_dx3_32", 32, 10, 256},  {"mlp_dw3_32", 10, 32, 256},
};

bool CpuHasAvx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}

enum class Impl { kEigen, kKiln, kKilnAvx2, kTensor };

// kiln's AVX2 kernel on one thread's rows, with that thread's packing buffers.
void KilnAvx2Rows(const float* a, cpu::MatrixLayout la, const float* b, cpu::MatrixLayout lb, float* c, int64_t r0,
                  int64_t rows, int64_t k, int64_t n) {
  thread_local std::vector<float> packed_a, packed_b;
  packed_a.resize(cpu::avx2f32::kPackedA + 16);
  packed_b.resize(cpu::avx2f32::PackedB(k, n) + 16);
  auto aligned = [](std::vector<float>& v) {
    return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(v.data()) + 63) / 64 * 64);
  };
  cpu::avx2f32::Gemm(a + r0 * (la.row_major ? la.ld : 1), la, b, lb, c + r0 * n, n, rows, k, n, false,
                     {aligned(packed_a), aligned(packed_b)});
}

// An operand `rows` x `cols`, stored row-major or column-major: its values for the kernels
// (contiguous, in that order) and a tensor view of the same layout for matmul.
struct Operand {
  std::vector<float> values;
  CpuTensor view;
  Operand(int64_t rows, int64_t cols, bool row_major, Generator& gen)
      : view(CpuTensor::uniform(row_major ? Shape{rows, cols} : Shape{cols, rows}, -1, 1, gen)) {
    const TensorData d = view.to_data();
    values.assign(d.values<float>().begin(), d.values<float>().end());
    if (!row_major) view = view.transpose(0, 1);
  }
};

// The row blocks matmul.cc gives each thread, one GEMM each.
template <class Fn>
void OverRowBlocks(int threads, int64_t m, Fn gemm) {
  const int64_t per = (m + threads - 1) / threads;
  cpu::ParallelFor(CpuDevice(0), threads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) gemm(t * per, std::min(per, m - t * per));
  });
}

void BM_Gemm(benchmark::State& state, GemmShape s, bool ra, bool rb, int threads, Impl impl) {
  if (!cpu::Configure({.devices = 1, .threads_per_device = threads}).ok()) std::abort();
  Generator gen(1);
  const Operand a(s.m, s.k, ra, gen), b(s.k, s.n, rb, gen);
  const cpu::MatrixLayout la{ra, ra ? s.k : s.m}, lb{rb, rb ? s.n : s.k};
  const float* pa = a.values.data();
  const float* pb = b.values.data();
  std::vector<float> c(s.m * s.n);
  for (auto _ : state) {
    if (impl == Impl::kTensor) {
      benchmark::DoNotOptimize(a.view.matmul(b.view));
      continue;
    }
    OverRowBlocks(threads, s.m, [&](int64_t r0, int64_t rows) {
      if (impl == Impl::kKilnAvx2) {
        KilnAvx2Rows(pa, la, pb, lb, c.data(), r0, rows, s.k, s.n);
      } else if (impl == Impl::kEigen) {
        (CpuHasAvx512() ? cpu::avx512::GemmBlockF32 : cpu::avx2::GemmBlockF32)(pa, la, pb, lb, c.data(), r0, rows, s.k,
                                                                               s.n);
      } else {
        cpu::GemmBlock(pa, la, pb, lb, c.data(), r0, rows, s.k, s.n);
      }
    });
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * s.m * s.k * s.n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Names: shape/layouts (r or c for A, then B)/threads/implementation.
const bool kRegistered = [] {
  for (const GemmShape& s : kShapes) {
    for (int layouts = 0; layouts < 4; ++layouts) {
      const bool ra = layouts < 2, rb = layouts % 2 == 0;
      for (int threads : {1, 2}) {
        for (Impl impl : {Impl::kEigen, Impl::kKiln, Impl::kKilnAvx2, Impl::kTensor}) {
          const char* impl_name = impl == Impl::kEigen      ? "eigen"
                                  : impl == Impl::kKiln     ? "kiln"
                                  : impl == Impl::kKilnAvx2 ? "kiln_avx2"
                                                            : "tensor";
          const std::string name = std::string(s.name) + "/" + (ra ? "r" : "c") + (rb ? "r" : "c") + "/t" +
                                   std::to_string(threads) + "/" + impl_name;
          benchmark::RegisterBenchmark(name.c_str(), BM_Gemm, s, ra, rb, threads, impl)
              ->Unit(benchmark::kMillisecond)
              ->MeasureProcessCPUTime()
              ->UseRealTime();
        }
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace kiln
