// A DataParallel<Cuda> training step on one GPU, eager (DataParallel::Step) or replayed from a
// CUDA graph (distributed/captured_step.h), for bench/cuda_bench.cc (real GPU) and
// bench/cuda_host_bench.cc (host time, over the fake runtime too). Both take a step per
// iteration and wait for its loss, as a training loop does.
//   range(0): 0 = tiny MLP 10-100-100-1, batch 64 (host-bound: the case graphs are for);
//             1 = MLP 784-256-256-10, batch 256 (examples/train's model, MSE to keep the
//             step capturable: cross-entropy's gather checks its indices on the host).
//   range(1): 0 = eager, 1 = captured.
#ifndef KILN_BENCH_CAPTURED_STEP_BENCH_H_
#define KILN_BENCH_CAPTURED_STEP_BENCH_H_

#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "distributed/captured_step.h"
#include "distributed/data_parallel.h"
#include "distributed/device_group.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"

namespace kiln::bench {

// `after_step` runs after every timed step (the fake's counters, a sync); returns the count of
// steps taken.
template <class AfterStep>
void CapturedStepBenchmark(benchmark::State& state, AfterStep&& after_step) {
  using AD = Autodiff<Cuda>;
  const bool mlp = state.range(0) == 1, captured = state.range(1) == 1;
  const int64_t in = mlp ? 784 : 10, hidden = mlp ? 256 : 100, out = mlp ? 10 : 1, batch = mlp ? 256 : 64;
  Generator gen(1);
  nn::Sequential<AD> model;
  model.add<nn::Linear<AD>>(in, hidden, gen)
      .add<nn::ReLU<AD>>()
      .add<nn::Linear<AD>>(hidden, hidden, gen)
      .add<nn::ReLU<AD>>()
      .add<nn::Linear<AD>>(hidden, out, gen);
  auto dp = distributed::DataParallel<Cuda>::Create(
      model, std::make_shared<distributed::DeviceGroup<AD>>(std::vector<CudaDevice>{CudaDevice(0)}),
      [] { return std::make_unique<nn::Sgd<Cuda>>(0.01, nn::SgdOptions{.momentum = 0.9}); });
  if (!dp.ok()) {
    state.SkipWithError(std::string(dp.status().message()).c_str());
    return;
  }
  const auto loss = [](nn::Module<AD>& m, const Tensor<AD>& xs, const Tensor<AD>& ys) {
    return nn::MeanSquaredError(m(xs), ys);
  };
  auto step = distributed::CapturedStep::Create(**dp, loss);
  if (!step.ok()) {
    state.SkipWithError(std::string(step.status().message()).c_str());
    return;
  }
  const Tensor<Cuda> x = Tensor<Cuda>::uniform({batch, in}, -1, 1, gen);
  const Tensor<Cuda> y = Tensor<Cuda>::uniform({batch, out}, -1, 1, gen);
  const auto one = [&]() -> bool { return captured ? (*step)->Step(x, y).ok() : (*dp)->Step(x, y, loss).ok(); };
  for (int i = 0; i < 3; ++i) {  // warm-up; the captured path captures on its first
    if (!one()) {
      state.SkipWithError("step failed");
      return;
    }
  }
  after_step(/*start=*/true);
  for (auto _ : state) {
    if (!one()) {
      state.SkipWithError("step failed");
      return;
    }
  }
  after_step(/*start=*/false);
  state.counters["samples/s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace kiln::bench

#endif  // KILN_BENCH_CAPTURED_STEP_BENCH_H_
