// bf16 and f16 against f32 on the CPU backend, in one run: matmul (1024^2, 2 threads), add of 16M
// elements (2 threads), and, as the no-framework peer of a half matmul, Eigen's own bfloat16 GEMM
// (1 thread: Eigen's matrix product has no thread pool here). kiln computes half matmuls in f32
// (the operands widened, AVX2/AVX-512 f32 GEMM, the result rounded once), so no AVX-512 BF16
// instruction is used yet; bench/README.md says what that costs.
#include <benchmark/benchmark.h>

#include "Eigen/Core"
#include "backends/cpu/cpu_backend.h"

namespace kiln {
namespace {

void UseThreads(int threads) {
  if (!cpu::Configure({.devices = 1, .threads_per_device = threads}).ok()) std::abort();
}

const DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

void BM_Matmul(benchmark::State& state) {
  const DType dtype = kDTypes[state.range(0)];
  const int64_t n = state.range(1);
  UseThreads(static_cast<int>(state.range(2)));
  Generator gen(1);
  const CpuTensor a = CpuTensor::uniform({n, n}, -1, 1, gen, dtype);
  const CpuTensor b = CpuTensor::uniform({n, n}, -1, 1, gen, dtype);
  for (auto _ : state) benchmark::DoNotOptimize(a.matmul(b));
  state.SetLabel(DTypeName(dtype));
  state.counters["GFLOPS"] = benchmark::Counter(2e-9 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
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
BENCHMARK(BM_Matmul)->ArgsProduct({{0, 1, 2}, {1024}, {2}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulEigenBf16)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Add)->ArgsProduct({{0, 1, 2}, {2}})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace kiln
