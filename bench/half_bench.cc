// bf16 and f16 against f32 on the CPU backend, in one run: matmul (1024^2 and two training
// shapes, 2 threads), add of 16M elements (2 threads), and, as the no-framework peer of a half
// matmul, Eigen's own bfloat16 GEMM (1 thread: Eigen's matrix product has no thread pool here).
// bf16 matmuls run the AMX kernel where the CPU has it and Linux grants the tile state, else the
// AVX-512 BF16 kernel where the CPU has that (backends/cpu/gemm.h; the header's context says
// which, and why AMX is not used where it is not); the
// "bf16 via f32" row times the path they take elsewhere (the operands widened, the f32 GEMM,
// the result rounded once: HalfInF32), in the same run. f16 always takes that path.
// bench/torch_half_matmul.py times PyTorch on the same shapes; bench/README.md has the figures.
#include <benchmark/benchmark.h>

#include <array>
#include <string>

#include "Eigen/Core"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/gemm_choice.h"

namespace kiln {
namespace {

void UseThreads(int threads) {
  if (!cpu::Configure({.devices = 1, .threads_per_device = threads}).ok()) std::abort();
}

// In the output's header: the bf16 kernel, and what Linux said to the AMX request.
const bool kContext = [] {
  benchmark::AddCustomContext("kiln_bf16_gemm", cpu::Bf16GemmKernel());
  const absl::Status& amx = cpu::AmxPermission();
  benchmark::AddCustomContext("kiln_amx", amx.ok() ? "granted" : std::string(amx.message()));
  return true;
}();

const DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

// What BM_Matmul times, by its first argument.
// kBf16WeightT: B read through a transposed view, as nn::Linear reads its weight (x W^T).
enum MatmulPath { kF32, kBf16, kBf16WeightT, kBf16ViaF32, kF16 };

void BM_Matmul(benchmark::State& state) {
  const auto path = static_cast<MatmulPath>(state.range(0));
  const int64_t m = state.range(1), k = state.range(2), n = state.range(3);
  UseThreads(static_cast<int>(state.range(4)));
  const DType dtype = path == kF32 ? DType::kF32 : path == kF16 ? DType::kF16 : DType::kBF16;
  Generator gen(1);
  const CpuTensor a = CpuTensor::uniform({m, k}, -1, 1, gen, dtype);
  const CpuTensor b = path == kBf16WeightT ? CpuTensor::uniform({n, k}, -1, 1, gen, dtype).transpose(0, 1)
                                           : CpuTensor::uniform({k, n}, -1, 1, gen, dtype);
  if (path == kBf16ViaF32) {
    for (auto _ : state) {
      benchmark::DoNotOptimize(a.to(DType::kF32).matmul(b.to(DType::kF32)).to(DType::kBF16));
    }
  } else {
    for (auto _ : state) benchmark::DoNotOptimize(a.matmul(b));
  }
  const std::string f32_kernel = cpu::GemmKernel();
  state.SetLabel(path == kF32           ? "f32 (" + f32_kernel + ")"
                 : path == kBf16        ? "bf16 (" + std::string(cpu::Bf16GemmKernel()) + ")"
                 : path == kBf16WeightT ? "bf16 x W^T (" + std::string(cpu::Bf16GemmKernel()) + ")"
                 : path == kBf16ViaF32  ? "bf16 via f32 (" + f32_kernel + ")"
                                        : "f16 via f32 (" + f32_kernel + ")");
  state.counters["GFLOPS"] = benchmark::Counter(2e-9 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}

// m, k, n: square, an MLP's first layer at batch 64 (784 -> 256), a GPT block's MLP (768 -> 3072,
// 512 tokens); the paths interleaved, so a noisy moment hits all of them alike.
void MatmulArgs(benchmark::internal::Benchmark* b) {
  for (const auto& [m, k, n] : {std::array<int64_t, 3>{1024, 1024, 1024}, {64, 784, 256}, {512, 768, 3072}}) {
    for (int64_t path : {kF32, kBf16, kBf16WeightT, kBf16ViaF32, kF16}) b->Args({path, m, k, n, 2});
  }
}

void BM_MatmulEigenBf16(benchmark::State& state) {
  const int64_t n = state.range(0);
  using Matrix = Eigen::Matrix<Eigen::bfloat16, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Matrix a = Eigen::MatrixXf::Random(n, n).cast<Eigen::bfloat16>();
  const Matrix b = Eigen::MatrixXf::Random(n, n).cast<Eigen::bfloat16>();
  for (auto _ : state) {
    Matrix c(n, n);
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPS"] = benchmark::Counter(2e-9 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Add(benchmark::State& state) {
  const DType dtype = kDTypes[state.range(0)];
  constexpr int64_t kElements = int64_t{1} << 24;
  UseThreads(static_cast<int>(state.range(1)));
  const CpuTensor a = CpuTensor::full({kElements}, 1.0, dtype);
  const CpuTensor b = CpuTensor::full({kElements}, 2.0, dtype);
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
  state.SetLabel(DTypeName(dtype));
  state.counters["GB/s"] =
      benchmark::Counter(3e-9 * kElements * DTypeSize(dtype), benchmark::Counter::kIsIterationInvariantRate);
}

// Interleaved dtypes, so a noisy moment hits all three alike.
BENCHMARK(BM_Matmul)->Apply(MatmulArgs)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulEigenBf16)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Add)->ArgsProduct({{0, 1, 2}, {2}})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace kiln
