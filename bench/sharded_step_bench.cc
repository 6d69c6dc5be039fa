// Step time of the README's first command (examples/train --model=mlp: 784-256-256-10, SGD
// with momentum 0.9, batch 64) under each sharding stage on cpu:0,cpu:1 (one thread per
// device), next to cpu:0 alone with both threads, in one run. Args: {devices, stage, bucket
// bytes} with stage 0 none, 1 optimizer (ZeRO-1), 2 gradients (ZeRO-2), and bucket bytes 0 for
// SyncOptions' default; the last row packs the whole model in one 25 MiB bucket (no parameter
// in a bucket of its own: bucket_plan.h), for what that costs. The figures are noisy on a
// shared machine; compare them side by side, interleaved, by their fastest repetition (the
// "min" aggregate of the time: the least disturbed by other work). cpu_us/step is the CPU time
// of every thread of the process per step (spinning included).
//
//   ./bazelw run -c opt //bench:sharded_step_bench -- --benchmark_repetitions=15
//       --benchmark_min_time=0.2 --benchmark_enable_random_interleaving=true
//       --benchmark_report_aggregates_only=true   (one line)
//
// On a machine others load, `chrt -f 1` before the binary (root) keeps their threads off its
// cores for the run (not their memory traffic).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "distributed/data_parallel.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"

namespace kiln::distributed {
namespace {

using AD = Autodiff<Cpu>;

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

void BM_MlpStep(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  const auto stage = static_cast<Sharding>(state.range(1));
  const int cores = cpu::HardwareThreads();
  if (!cpu::Configure({.devices = devices, .threads_per_device = std::max(1, cores / devices)}).ok()) std::abort();
  Generator gen(1);
  nn::Sequential<AD> model;
  model.add<nn::Flatten<AD>>()
      .add<nn::Linear<AD>>(784, 256, gen)
      .add<nn::ReLU<AD>>()
      .add<nn::Linear<AD>>(256, 256, gen)
      .add<nn::ReLU<AD>>()
      .add<nn::Linear<AD>>(256, 10, gen);
  std::vector<CpuDevice> list;
  for (int r = 0; r < devices; ++r) list.push_back(CpuDevice(r));
  auto dp = DataParallel<Cpu>::Create(
      model, std::make_shared<DeviceGroup<AD>>(list),
      [] { return std::make_unique<nn::Sgd<Cpu>>(0.05, nn::SgdOptions{.momentum = 0.9}); },
      {.bucket_bytes = state.range(2) > 0 ? std::optional<int64_t>(state.range(2)) : std::nullopt, .sharding = stage});
  if (!dp.ok()) std::abort();
  const int64_t batch = 64;
  const auto x = Tensor<Cpu>::uniform({batch, 784}, 0, 1, gen);
  const auto y = Tensor<Cpu>::uniform({batch}, 0, 10, gen).to(DType::kI64);
  const auto loss = [](nn::Module<AD>& m, const Tensor<AD>& xs, const Tensor<AD>& ys) {
    return nn::CrossEntropy(m(xs), ys);
  };
  const double cpu_before = ProcessCpuSeconds();
  for (auto _ : state) {
    if (!(*dp)->Step(x, y, loss).ok()) state.SkipWithError("step failed");
  }
  // The CPU time of every thread (members, pools, sync) per step: the work a step costs,
  // which other programs on a shared machine disturb less than its wall time.
  state.counters["cpu_us/step"] = benchmark::Counter((ProcessCpuSeconds() - cpu_before) * 1e6 / state.iterations());
  state.SetLabel(absl::StrCat(devices, " device(s), shard ", ShardingName(stage)));
  state.counters["samples/s"] = benchmark::Counter(batch, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MlpStep)
    ->Args({1, 0, 0})
    ->Args({2, 0, 0})
    ->Args({2, 1, 0})
    ->Args({2, 2, 0})
    ->Args({2, 1, int64_t{25} << 20})
    ->UseRealTime()
    ->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); })
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln::distributed
