// bf16 and f16 against f32 on the CPU backend, in one run: matmul (1024^2 and two training
// shapes, 2 threads), add of 16M elements (2 threads), and, as the no-framework peer of a half
// matmul, Eigen's own bfloat16 GEMM (1 thread: Eigen's matrix product has no thread pool here).
// bf16 matmuls run the AMX kernel where the CPU has it and Linux grants the tile state, else the
// AVX-512 BF16 kernel where the CPU has that (backends/cpu/gemm.h; the header's context says
// which, and why AMX is not used where it is not); the
// "bf16 via f32" row times the path they take elsewhere (the operands widened, the f32 GEMM,
// the result rounded once: HalfInF32), in the same run. f16 always takes that path.
// bench/torch_half_matmul.py times PyTorch on the same shapes; bench/README.md has the figures.
// BM_FusedHalf times the fused kernels that widen half operands block by block inside their own
// pass (backends/cpu/half_blocks.h) at the larger GPT's shapes, against the same op in f32 and
// through HalfInF32 (whole-tensor casts around the f32 kernel), 2 threads.
#include <benchmark/benchmark.h>

#include <array>
#include <string>

#include "Eigen/Core"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/gemm_choice.h"
#include "tensor/half_in_f32.h"

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

// What BM_FusedHalf runs, by its first argument, and how, by its second.
enum FusedOp { kGelu, kGeluBackward, kAttention, kAttentionBackward, kColumnSum };
enum FusedPath { kFusedF32, kFusedBf16, kFusedBf16ViaF32 };

// The larger GPT's shapes (bench/gpt_step.h): batch 8, context 256, width 384, 6 heads.
void BM_FusedHalf(benchmark::State& state) {
  const auto op = static_cast<FusedOp>(state.range(0));
  const auto path = static_cast<FusedPath>(state.range(1));
  UseThreads(2);
  const DType dtype = path == kFusedF32 ? DType::kF32 : DType::kBF16;
  const bool via_f32 = path == kFusedBf16ViaF32;
  Generator gen(1);
  const CpuTensor hidden = CpuTensor::normal({8, 256, 1536}, 0, 1, gen).to(dtype);
  const CpuTensor qkv = CpuTensor::normal({8, 256, 1152}, 0, 1, gen).to(dtype);
  const CpuTensor gy = CpuTensor::normal({8, 256, 384}, 0, 1, gen).to(dtype);
  const Cpu::Primitive weights = Cpu::causal_attention(qkv.primitive(), 6).weights;
  const int64_t rows[] = {0, 1};
  for (auto _ : state) {
    switch (op) {
      case kGelu:
        benchmark::DoNotOptimize(via_f32 ? HalfInF32<Cpu>::gelu(hidden.primitive(), true)
                                         : Cpu::gelu(hidden.primitive(), true));
        break;
      case kGeluBackward:
        benchmark::DoNotOptimize(via_f32 ? HalfInF32<Cpu>::gelu_backward(hidden.primitive(), hidden.primitive(), true)
                                         : Cpu::gelu_backward(hidden.primitive(), hidden.primitive(), true));
        break;
      case kAttention:
        benchmark::DoNotOptimize(via_f32 ? HalfInF32<Cpu>::causal_attention(qkv.primitive(), 6)
                                         : Cpu::causal_attention(qkv.primitive(), 6));
        break;
      case kAttentionBackward:
        benchmark::DoNotOptimize(
            via_f32 ? HalfInF32<Cpu>::causal_attention_backward(qkv.primitive(), weights, gy.primitive(), 6)
                    : Cpu::causal_attention_backward(qkv.primitive(), weights, gy.primitive(), 6));
        break;
      case kColumnSum:  // a Linear's bias gradient: the sum over batch and time
        benchmark::DoNotOptimize(via_f32 ? HalfInF32<Cpu>::reduce(ReduceOp::kSum, hidden.primitive(), rows, false)
                                         : Cpu::reduce(ReduceOp::kSum, hidden.primitive(), rows, false));
        break;
    }
  }
  static constexpr const char* kOps[] = {"gelu", "gelu_backward", "causal_attention", "causal_attention_backward",
                                         "sum over [8, 256]"};
  static constexpr const char* kPaths[] = {"f32", "bf16", "bf16 via f32 (HalfInF32)"};
  state.SetLabel(std::string(kOps[op]) + ", " + kPaths[path]);
}

// Interleaved dtypes, so a noisy moment hits all three alike.
BENCHMARK(BM_Matmul)->Apply(MatmulArgs)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulEigenBf16)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Add)->ArgsProduct({{0, 1, 2}, {2}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_FusedHalf)->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace kiln
