// The CPU backend's hot paths next to their bounds, in one binary so they share a run:
//  - f32 matmul through kiln vs Eigen's own GEMM (1 thread) and Eigen's thread-pool
//    contraction (2 threads), with the same compiler flags;
//  - element-wise add and a full sum of 16M floats vs a memcpy of the same bytes.
// bench/compare.py turns the JSON output into the ratios quoted in bench/README.md.
#define EIGEN_USE_THREADS
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "Eigen/Core"
#include "backends/cpu/cpu_backend.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace kiln {
namespace {

void UseThreads(int threads) {
  if (!cpu::Configure({.devices = 1, .threads_per_device = threads}).ok()) std::abort();
}

void SetFlops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOPS"] =
      benchmark::Counter(flops_per_iteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void SetBandwidth(benchmark::State& state, double bytes_per_iteration) {
  state.counters["GB/s"] =
      benchmark::Counter(bytes_per_iteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- matmul -------------------------------------------------------------------------------

void BM_MatmulKiln(benchmark::State& state) {
  const int64_t n = state.range(0);
  UseThreads(static_cast<int>(state.range(1)));
  Generator gen(1);
  const CpuTensor a = CpuTensor::uniform({n, n}, -1, 1, gen);
  const CpuTensor b = CpuTensor::uniform({n, n}, -1, 1, gen);
  for (auto _ : state) benchmark::DoNotOptimize(a.matmul(b));
  SetFlops(state, 2.0 * n * n * n);
}

void BM_MatmulEigen(benchmark::State& state) {
  const int64_t n = state.range(0);
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Matrix a = Matrix::Random(n, n), b = Matrix::Random(n, n);
  for (auto _ : state) {
    Matrix c(n, n);  // a fresh result, as kiln returns one
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  SetFlops(state, 2.0 * n * n * n);
}

void BM_MatmulEigenThreadPool(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  Eigen::ThreadPool pool(threads);
  Eigen::ThreadPoolDevice device(&pool, threads);
  Eigen::Tensor<float, 2, Eigen::RowMajor> a(n, n), b(n, n);
  a.setRandom();
  b.setRandom();
  const Eigen::array<Eigen::IndexPair<int>, 1> dims = {Eigen::IndexPair<int>(1, 0)};
  for (auto _ : state) {
    Eigen::Tensor<float, 2, Eigen::RowMajor> c(n, n);
    c.device(device) = a.contract(b, dims);
    benchmark::DoNotOptimize(c.data());
  }
  SetFlops(state, 2.0 * n * n * n);
}

// ---- memory-bound ops -------------------------------------------------------------------------

constexpr int64_t kElements = int64_t{1} << 24;  // 16M floats, 64 MiB

// The bound: glibc's memcpy, split over the same number of threads as the op it bounds.
void BM_Memcpy(benchmark::State& state) {
  UseThreads(static_cast<int>(state.range(0)));
  std::vector<float> src(kElements, 1.0f), dst(kElements);
  for (auto _ : state) {
    cpu::ParallelFor(CpuDevice(0), kElements, 1 << 20, [&](int64_t begin, int64_t end) {
      std::memcpy(dst.data() + begin, src.data() + begin, (end - begin) * sizeof(float));
    });
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  SetBandwidth(state, 2.0 * kElements * sizeof(float));  // read + write
}

void BM_AddKiln(benchmark::State& state) {
  UseThreads(static_cast<int>(state.range(0)));
  const CpuTensor a = CpuTensor::full({kElements}, 1.0);
  const CpuTensor b = CpuTensor::full({kElements}, 2.0);
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
  SetBandwidth(state, 3.0 * kElements * sizeof(float));  // two reads + one write
}

void BM_SumKiln(benchmark::State& state) {
  UseThreads(static_cast<int>(state.range(0)));
  const CpuTensor a = CpuTensor::full({kElements}, 1.0);
  for (auto _ : state) benchmark::DoNotOptimize(a.sum());
  SetBandwidth(state, 1.0 * kElements * sizeof(float));  // one read
}

BENCHMARK(BM_MatmulEigen)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulKiln)
    ->Args({256, 1})
    ->Args({1024, 1})
    ->Args({2048, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_MatmulEigenThreadPool)
    ->Args({256, 2})
    ->Args({1024, 2})
    ->Args({2048, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_MatmulKiln)
    ->Args({256, 2})
    ->Args({1024, 2})
    ->Args({2048, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Memcpy)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AddKiln)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SumKiln)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace kiln
