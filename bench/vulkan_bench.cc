// The Vulkan backend's hot paths next to the CPU backend in one run (built with
// --config=vulkan): f32 matmul (square, and the MLP's [batch, 784] x [784, 256]), element-wise
// add and a full sum against the device's own copy of the same bytes, and matmul and add in
// bf16 and f16 against f32. Every timed iteration
// ends with a wait for the device, so figures are end-to-end. The device's name is printed
// first and recorded in the JSON context; on lavapipe (a CPU) the figures only show the path
// is sound, on a GPU they are the ones to compare.
#include <benchmark/benchmark.h>

#include <cstdio>

#include "backends/cpu/cpu_backend.h"
#include "backends/vulkan/vulkan_backend.h"

namespace kiln {
namespace {

using V = Tensor<Vulkan>;

void SetFlops(benchmark::State& state, double flops) {
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void SetBandwidth(benchmark::State& state, double bytes) {
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

bool Ready(benchmark::State& state) {
  if (absl::Status s = vulkan::Available(); !s.ok()) {
    state.SkipWithError(std::string(s.message()).c_str());
    return false;
  }
  return true;
}

template <class B>
void Sync(const Tensor<B>& t) {
  if constexpr (std::is_same_v<B, Vulkan>) Vulkan::synchronize(t.device());
}

// Matmul of [m, k] x [k, n] (state.range(0..2)) in `dtype`.
template <class B>
void TimeMatmul(benchmark::State& state, DType dtype) {
  if constexpr (std::is_same_v<B, Vulkan>) {
    if (!Ready(state)) return;
  }
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Generator gen(1);
  const auto a = Tensor<B>::uniform({m, k}, -1, 1, gen).to(dtype), b = Tensor<B>::uniform({k, n}, -1, 1, gen).to(dtype);
  Sync(a.matmul(b));  // kernels compiled, memory pooled
  for (auto _ : state) {
    const auto c = a.matmul(b);
    Sync(c);
  }
  SetFlops(state, 2.0 * m * k * n);
}
template <class B>
void BM_Matmul(benchmark::State& state) {
  TimeMatmul<B>(state, DType::kF32);
}

// Element-wise add of state.range(0) elements in `dtype`; GB/s counts that dtype's bytes.
template <class B>
void TimeAdd(benchmark::State& state, DType dtype) {
  if constexpr (std::is_same_v<B, Vulkan>) {
    if (!Ready(state)) return;
  }
  const int64_t n = state.range(0);
  Generator gen(1);
  const auto a = Tensor<B>::uniform({n}, -1, 1, gen).to(dtype), b = Tensor<B>::uniform({n}, -1, 1, gen).to(dtype);
  Sync(a + b);
  for (auto _ : state) {
    const auto c = a + b;
    Sync(c);
  }
  SetBandwidth(state, 3.0 * DTypeSize(dtype) * n);
}
template <class B>
void BM_Add(benchmark::State& state) {
  TimeAdd<B>(state, DType::kF32);
}

// bf16 and f16 against f32 on the device (issue 19), the last argument picking the type:
// Vulkan stores halves (16-bit storage) and computes in f32, so a half op is the f32 kernel
// with its operands widened and its result rounded.
constexpr DType kTypes[] = {DType::kF32, DType::kBF16, DType::kF16};
void BM_VulkanTypedMatmul(benchmark::State& state) {
  const DType dtype = kTypes[state.range(3)];
  state.SetLabel(DTypeName(dtype));
  TimeMatmul<Vulkan>(state, dtype);
}
void BM_VulkanTypedAdd(benchmark::State& state) {
  const DType dtype = kTypes[state.range(1)];
  state.SetLabel(DTypeName(dtype));
  TimeAdd<Vulkan>(state, dtype);
}

template <class B>
void BM_Sum(benchmark::State& state) {
  if constexpr (std::is_same_v<B, Vulkan>) {
    if (!Ready(state)) return;
  }
  const int64_t n = state.range(0);
  Generator gen(1);
  const auto a = Tensor<B>::uniform({n}, -1, 1, gen);
  Sync(a.sum());
  for (auto _ : state) {
    const auto s = a.sum();
    Sync(s);
  }
  SetBandwidth(state, 4.0 * n);
}

// The device's own bound for add: a strided copy of the same number of elements (one read,
// one write) through kiln's copy kernel, as a contiguous() of a transposed view would run it.
void BM_VulkanCopyBound(benchmark::State& state) {
  if (!Ready(state)) return;
  const int64_t n = state.range(0);
  const auto a = V::ones({2, n / 2});
  Sync(a.transpose(0, 1).reshape({n}));
  for (auto _ : state) {
    const auto c = a.transpose(0, 1).reshape({n});
    Sync(c);
  }
  SetBandwidth(state, 2.0 * 4 * n);
}

void MatmulSizes(benchmark::internal::Benchmark* b) {
  b->Args({256, 256, 256})
      ->Args({1024, 1024, 1024})
      ->Args({64, 784, 256})
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
}

BENCHMARK(BM_Matmul<Cpu>)->Apply(MatmulSizes);
BENCHMARK(BM_Matmul<Vulkan>)->Apply(MatmulSizes);
BENCHMARK(BM_Add<Cpu>)->Arg(1 << 22)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Add<Vulkan>)->Arg(1 << 16)->Arg(1 << 22)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_VulkanCopyBound)->Arg(1 << 22)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_VulkanTypedMatmul)
    ->ArgsProduct({{1024}, {1024}, {1024}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_VulkanTypedAdd)->ArgsProduct({{1 << 22}, {0, 1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Sum<Cpu>)->Arg(1 << 22)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Sum<Vulkan>)->Arg(1 << 22)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  const auto name = kiln::vulkan::Describe(kiln::VulkanDevice(0));
  const std::string device = name.ok() ? *name : std::string(name.status().message());
  std::printf("vulkan:0 is %s\n", device.c_str());
  benchmark::AddCustomContext("vulkan_device", device);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
