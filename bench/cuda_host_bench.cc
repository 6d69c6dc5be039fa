// Host time per CUDA op. Built two ways from this file:
//   //bench:cuda_host_bench (KILN_FAKE_CUDA) links the fake CUDA runtime
//   (backends/cuda/fake), so it runs without a GPU: kernel launches and GEMMs are counted
//   no-ops and what is timed is kiln's own work per op (shape and stride checks, the
//   allocator, the device context, the launch path, the tensor's bookkeeping). Each benchmark
//   also reports the fake's counts per op (launches, GEMMs, synchronisations, cudaMalloc
//   calls, device switches, other runtime calls), so a change in what an op asks of CUDA
//   shows up beside its time.
//   //bench:cuda_host_bench_real links the real runtime and needs a GPU (without one it says
//   so and exits 0): the same ops with real launches, so the two side by side give the
//   runtime's share. It waits for the device, untimed, every kSyncEvery ops, so that the
//   launch queue never fills and the host never waits for the device inside the timing.
// Next to the ops, the bare launch of an empty kernel: the limit with no framework at all.
#include <benchmark/benchmark.h>

#include "autodiff/autodiff.h"
#include "backends/cuda/context.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/dispatch/dispatch_backend.h"
#include "bench/captured_step_bench.h"
#include "bench/kernels/empty_kernel.h"
#if defined(KILN_FAKE_CUDA)
#include "backends/cuda/fake/fake_runtime.h"
#endif

namespace kiln {
namespace {

using T = Tensor<Cuda>;
constexpr int64_t kN = 1024;

// Runs `op` once per iteration (and reports what it asked of the fake runtime per call).
template <class F>
void Measure(benchmark::State& state, F&& op) {
  op();  // warm-up: the allocator's cache holds this op's sizes afterwards
#if defined(KILN_FAKE_CUDA)
  const cuda::fake::Counts before = cuda::fake::GetCounts();
  for (auto _ : state) op();
  const cuda::fake::Counts d = cuda::fake::GetCounts() - before;
  const double n = static_cast<double>(state.iterations());
  state.counters["launches"] = d.launches / n;
  state.counters["gemms"] = d.blas_calls / n;
  state.counters["syncs"] = d.syncs / n;
  state.counters["mallocs"] = d.mallocs / n;
  state.counters["device_switches"] = d.device_switches / n;
  state.counters["runtime_calls"] = d.runtime_calls / n;
#else
  constexpr int64_t kSyncEvery = 256;  // well below the ~1000 launches a stream queues
  int64_t since_sync = 0;
  for (auto _ : state) {
    op();
    if (++since_sync == kSyncEvery) {
      state.PauseTiming();
      cuda::Synchronize(CudaDevice(0));
      state.ResumeTiming();
      since_sync = 0;
    }
  }
  cuda::Synchronize(CudaDevice(0));
#endif
}

void BM_BareLaunch(benchmark::State& state) {
  cudaStream_t stream = cuda::Context(CudaDevice(0)).stream;
  const T out = T::zeros({kN});
  auto* p = static_cast<float*>(out.primitive().mutable_data());
  Measure(state, [&] { benchmark::DoNotOptimize(bench::LaunchEmptyKernel(p, kN, stream)); });
}
BENCHMARK(BM_BareLaunch);

void BM_Add(benchmark::State& state) {
  const T a = T::ones({kN}), b = T::ones({kN});
  Measure(state, [&] { benchmark::DoNotOptimize(a + b); });
}
BENCHMARK(BM_Add);

void BM_Mul(benchmark::State& state) {
  const T a = T::ones({kN}), b = T::ones({kN});
  Measure(state, [&] { benchmark::DoNotOptimize(a * b); });
}
BENCHMARK(BM_Mul);

// [32, 32] + [32]: the row broadcast of a bias.
void BM_AddBroadcast(benchmark::State& state) {
  const T a = T::ones({32, 32}), b = T::ones({32});
  Measure(state, [&] { benchmark::DoNotOptimize(a + b); });
}
BENCHMARK(BM_AddBroadcast);

void BM_Exp(benchmark::State& state) {
  const T a = T::ones({kN});
  Measure(state, [&] { benchmark::DoNotOptimize(a.exp()); });
}
BENCHMARK(BM_Exp);

void BM_Relu(benchmark::State& state) {
  const T a = T::ones({kN});
  Measure(state, [&] { benchmark::DoNotOptimize(a.relu()); });
}
BENCHMARK(BM_Relu);

void BM_Sum(benchmark::State& state) {
  const T a = T::ones({kN});
  Measure(state, [&] { benchmark::DoNotOptimize(a.sum()); });
}
BENCHMARK(BM_Sum);

void BM_SumRows(benchmark::State& state) {
  const T a = T::ones({32, 32});
  Measure(state, [&] { benchmark::DoNotOptimize(a.sum({1})); });
}
BENCHMARK(BM_SumRows);

void BM_Matmul(benchmark::State& state) {
  const T a = T::ones({32, 32}), b = T::ones({32, 32});
  Measure(state, [&] { benchmark::DoNotOptimize(a.matmul(b)); });
}
BENCHMARK(BM_Matmul);

// The same add recorded for gradients: the forward op plus its graph node.
void BM_AutodiffAdd(benchmark::State& state) {
  using A = Tensor<Autodiff<Cuda>>;
  const A a = A::ones({kN}).require_grad(), b = A::ones({kN}).require_grad();
  Measure(state, [&] { benchmark::DoNotOptimize(a + b); });
}
BENCHMARK(BM_AutodiffAdd);

// The same add through the run-time backend on "cuda:0".
void BM_DispatchAdd(benchmark::State& state) {
  using D = Tensor<Dispatch>;
  const DispatchDevice device = *DispatchDevice::Parse("cuda:0");
  const D a = D::ones({kN}, DType::kF32, device), b = D::ones({kN}, DType::kF32, device);
  Measure(state, [&] { benchmark::DoNotOptimize(a + b); });
}
BENCHMARK(BM_DispatchAdd);

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// A one-GPU DataParallel step, eager against replayed from a CUDA graph (captured_step_bench.h):
// {model (0 tiny, 1 MLP), captured}. Over the fake runtime this is the host's time per step,
// with the fake's counts per step beside it.
void BM_DataParallelStep(benchmark::State& state) {
#if defined(KILN_FAKE_CUDA)
  cuda::fake::Counts before;
  bench::CapturedStepBenchmark(state, [&](bool start) {
    if (start) {
      before = cuda::fake::GetCounts();
      return;
    }
    const cuda::fake::Counts d = cuda::fake::GetCounts() - before;
    const double n = static_cast<double>(state.iterations());
    state.counters["launches"] = d.launches / n;
    state.counters["gemms"] = d.blas_calls / n;
    state.counters["graph_launches"] = d.graph_launches / n;
    state.counters["replayed_kernels"] = d.replayed_kernels / n;
    state.counters["mallocs"] = d.mallocs / n;
  });
#else
  bench::CapturedStepBenchmark(state, [](bool) {});
#endif
}
BENCHMARK(BM_DataParallelStep)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"mlp", "captured"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln
