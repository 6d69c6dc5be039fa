// One training step (forward, loss, backward, SGD with momentum) of the Fashion-MNIST MLP
// (784-256-256-10) and of a tiny, overhead-bound MLP (10-100-100-1), batch 64, on 2 threads;
// one step of a GPT-2 transformer block at examples/gpt's sizes; and the autodiff overhead per
// op of a chain of small ops. Built with --config=libtorch, the same binary also runs LibTorch
// on the MLP steps. The same steps written directly in Eigen (bench/eigen_mlp_step.h,
// bench/eigen_gpt_block_step.h), at 1 and 2 threads, are the no-framework limit
// bench/compare.py pairs kiln with (the faster of the two).
#include <benchmark/benchmark.h>

#define EIGEN_USE_THREADS  // before any Eigen header (bench/eigen_mlp_step.h)
#include "autodiff/autodiff.h"
#include "backends/cpu/cpu_backend.h"
#include "bench/eigen_gpt_block_step.h"
#include "bench/eigen_mlp_step.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "nn/precision.h"
#include "nn/sequential.h"
#include "nn/transformer_block.h"

#ifdef KILN_WITH_LIBTORCH
#include <torch/torch.h>
#endif

namespace kiln {
namespace {

using AD = Autodiff<Cpu>;
using T = Tensor<AD>;
constexpr int kThreads = 2;
constexpr int64_t kBatch = 64;

std::unique_ptr<nn::Sequential<AD>> Mlp(std::initializer_list<int64_t> sizes, Generator& gen) {
  auto net = std::make_unique<nn::Sequential<AD>>();
  const std::vector<int64_t> s(sizes);
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    net->add<nn::Linear<AD>>(s[i], s[i + 1], gen);
    if (i + 2 < s.size()) net->add<nn::ReLU<AD>>();
  }
  return net;
}

void BM_StepKiln(benchmark::State& state, std::initializer_list<int64_t> sizes, bool classify) {
  if (!cpu::Configure({.devices = 1, .threads_per_device = kThreads}).ok()) std::abort();
  Generator gen(1);
  auto net = Mlp(sizes, gen);
  const int64_t in = *sizes.begin(), out = *(sizes.end() - 1);
  const T x = T::uniform({kBatch, in}, -1, 1, gen);
  const T labels = T::from_inner(Tensor<Cpu>::uniform({kBatch}, 0, out, gen).to(DType::kI64));
  const T target = T::uniform({kBatch, out}, -1, 1, gen);
  nn::Sgd<Cpu> sgd(0.01, {.momentum = 0.9});
  for (auto _ : state) {
    const T y = (*net)(x);
    const T loss = classify ? nn::CrossEntropy(y, labels) : nn::MeanSquaredError(y, target);
    sgd.step(*net, loss.backward());
  }
}
BENCHMARK_CAPTURE(BM_StepKiln, mlp_784_256_256_10, {784, 256, 256, 10}, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_StepKiln, tiny_10_100_100_1, {10, 100, 100, 1}, false)->UseRealTime();

// The MLP step under mixed precision (nn/precision.h): f32 master weights, matmuls in bf16/f16.
void BM_StepKilnPrecision(benchmark::State& state, nn::Precision precision) {
  if (!cpu::Configure({.devices = 1, .threads_per_device = kThreads}).ok()) std::abort();
  Generator gen(1);
  auto net = Mlp({784, 256, 256, 10}, gen);
  nn::SetPrecision(*net, precision);
  const T x = T::uniform({kBatch, 784}, -1, 1, gen);
  const T labels = T::from_inner(Tensor<Cpu>::uniform({kBatch}, 0, 10, gen).to(DType::kI64));
  nn::Sgd<Cpu> sgd(0.01, {.momentum = 0.9});
  for (auto _ : state) sgd.step(*net, nn::CrossEntropy((*net)(x), labels).backward());
}
BENCHMARK_CAPTURE(BM_StepKilnPrecision, mlp_f32, nn::Precision::kF32)->UseRealTime();
BENCHMARK_CAPTURE(BM_StepKilnPrecision, mlp_bf16, nn::Precision::kBF16)->UseRealTime();
BENCHMARK_CAPTURE(BM_StepKilnPrecision, mlp_f16, nn::Precision::kF16)->UseRealTime();

void BM_StepEigen(benchmark::State& state, std::initializer_list<int64_t> sizes, bool classify) {
  bench::EigenMlpStep step(std::vector<int64_t>(sizes), kBatch, classify, static_cast<int>(state.range(0)));
  const float first = step.Step();
  float last = first;
  for (auto _ : state) last = step.Step();
  // The loss falls: the hand-written step trains.
  state.counters["loss_first"] = first;
  state.counters["loss_last"] = last;
}
BENCHMARK_CAPTURE(BM_StepEigen, mlp_784_256_256_10, {784, 256, 256, 10}, true)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_StepEigen, tiny_10_100_100_1, {10, 100, 100, 1}, false)->Arg(1)->Arg(2)->UseRealTime();

// One block of examples/gpt's model (batch 32, context 64, width 128, 4 heads, GPT-2's init):
// forward, mean squared error to a fixed target, backward, and AdamW as examples/gpt sets it
// (betas 0.9 / 0.99, decay 0.1 on the linear weights). Neither side clips the gradients.
constexpr bench::GptBlockShape kGptBlock{.batch = 32, .seq = 64, .width = 128, .heads = 4};

void BM_StepKiln(benchmark::State& state, bench::GptBlockShape s) {
  if (!cpu::Configure({.devices = 1, .threads_per_device = kThreads}).ok()) std::abort();
  Generator gen(1);
  nn::TransformerBlock<AD> block(s.width, s.heads, gen, {.init_std = 0.02, .residual_init_std = 0.02 / std::sqrt(2.0)});
  const T x = T::normal({s.batch, s.seq, s.width}, 0, 1, gen);
  const T target = T::normal({s.batch, s.seq, s.width}, 0, 1, gen);
  nn::AdamW<Cpu> adamw(1e-3, {.beta2 = 0.99, .weight_decay = 0.1, .decays = nn::DecayOnlyMatrices});
  for (auto _ : state) {
    const T loss = nn::MeanSquaredError(block(x), target);
    adamw.step(block, loss.backward());
  }
}
// CPU time over all threads too: the work per step, which a shared machine inflates less than
// the wall time.
BENCHMARK_CAPTURE(BM_StepKiln, gpt_block_32x64_d128_h4, kGptBlock)->UseRealTime()->MeasureProcessCPUTime();

void BM_StepEigen(benchmark::State& state, bench::GptBlockShape s) {
  bench::EigenGptBlockStep step(s, {}, static_cast<int>(state.range(0)));
  const float first = step.Step();
  float last = first;
  for (auto _ : state) last = step.Step();
  state.counters["loss_first"] = first;
  state.counters["loss_last"] = last;
}
BENCHMARK_CAPTURE(BM_StepEigen, gpt_block_32x64_d128_h4, kGptBlock)
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

// A chain of 100 element-wise ops on 16 floats, forward and backward: what each recorded op
// costs beyond its arithmetic.
void BM_AutodiffChainKiln(benchmark::State& state) {
  if (!cpu::Configure({.devices = 1, .threads_per_device = 1}).ok()) std::abort();
  Generator gen(2);
  const T w = T::uniform({16}, 0.5, 1.5, gen).require_grad();
  for (auto _ : state) {
    T y = w;
    for (int i = 0; i < 50; ++i) y = (y * 1.01f) + w;
    benchmark::DoNotOptimize(y.sum().backward());
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(101, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_AutodiffChainKiln)->UseRealTime();

#ifdef KILN_WITH_LIBTORCH
void BM_StepTorch(benchmark::State& state, std::initializer_list<int64_t> sizes, bool classify) {
  torch::set_num_threads(kThreads);
  torch::manual_seed(1);
  torch::nn::Sequential net;
  const std::vector<int64_t> s(sizes);
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    net->push_back(torch::nn::Linear(s[i], s[i + 1]));
    if (i + 2 < s.size()) net->push_back(torch::nn::ReLU());
  }
  const auto x = torch::rand({kBatch, s.front()}) * 2 - 1;
  const auto labels = torch::randint(0, s.back(), {kBatch}, torch::kLong);
  const auto target = torch::rand({kBatch, s.back()}) * 2 - 1;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  for (auto _ : state) {
    sgd.zero_grad();
    const auto y = net->forward(x);
    const auto loss = classify ? torch::nn::functional::cross_entropy(y, labels) : torch::mse_loss(y, target);
    loss.backward();
    sgd.step();
  }
}
BENCHMARK_CAPTURE(BM_StepTorch, mlp_784_256_256_10, {784, 256, 256, 10}, true)->UseRealTime();
BENCHMARK_CAPTURE(BM_StepTorch, tiny_10_100_100_1, {10, 100, 100, 1}, false)->UseRealTime();

void BM_AutodiffChainTorch(benchmark::State& state) {
  torch::set_num_threads(1);
  const auto w = (torch::rand({16}) + 0.5).requires_grad_(true);
  for (auto _ : state) {
    auto y = w;
    for (int i = 0; i < 50; ++i) y = (y * 1.01f) + w;
    y.sum().backward();
    w.mutable_grad().reset();
  }
  state.counters["ns_per_op"] =
      benchmark::Counter(101, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_AutodiffChainTorch)->UseRealTime();
#endif

}  // namespace
}  // namespace kiln
