// In-process collectives and data-parallel scaling on CPU devices, each next to its bound in
// the same run:
//  - all-reduce (sum, f32) of 1, 25 and 64 MiB over cpu:0,cpu:1 (one thread each), called by
//    each member's own thread, next to a memcpy of the same bytes on one thread. An
//    all-reduce moves at least twice a memcpy's bytes, so its bound is half memcpy's rate;
//  - DataParallel training steps of the Fashion-MNIST MLP (784-256-256-10) on cpu:0,cpu:1
//    against cpu:0 alone, one thread per device, 256 samples per device;
//  - the flight recorder's cost (distributed/flight_recorder.h), on and off (Arg 2048 / 0): a
//    tagged all-reduce of one float on a group of one member (nothing to wait for, so the
//    recorder's share is as large as it gets), and a DataParallel step of the tiny MLP
//    (10-100-100-1, 64 samples per device) on cpu:0,cpu:1.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "distributed/data_parallel.h"
#include "distributed/member_threads.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"

namespace kiln::distributed {
namespace {

void OneThreadPerDevice(int devices) {
  if (!cpu::Configure({.devices = devices, .threads_per_device = 1}).ok()) std::abort();
}

void BM_Memcpy(benchmark::State& state) {
  const int64_t bytes = state.range(0) << 20;
  std::vector<char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Times `reduce(group, r, input)` run by two member threads at once over f32 buffers of
// state.range(0) MiB holding 1 and 2. GB/s counts the f32 bytes each member ends up with,
// comparable to memcpy's.
template <class Reduce>
void TimeAllReduce(benchmark::State& state, Reduce reduce) {
  OneThreadPerDevice(2);
  const int64_t bytes = state.range(0) << 20;
  DeviceGroup<Cpu> group({CpuDevice(0), CpuDevice(1)});
  std::vector<Tensor<Cpu>> inputs;
  for (int r = 0; r < 2; ++r) inputs.push_back(Tensor<Cpu>::full({bytes / 4}, r + 1, DType::kF32, CpuDevice(r)));
  MemberThreads threads(2);
  for (auto _ : state) {
    const absl::Status s = threads.Run([&](int r) { return reduce(group, r, inputs[r]); });
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_AllReduceKiln(benchmark::State& state) {
  TimeAllReduce(state, [](DeviceGroup<Cpu>& group, int r, const Tensor<Cpu>& x) {
    return group.AllReduce(r, x, ReduceOp::kSum).status();
  });
}

// The same f32 gradients all-reduced as gradient sync does with SyncOptions::reduce_dtype =
// bf16: each member rounds its buffer to bf16, the bf16 all-reduce (half the bytes), the
// result widened back to f32.
void BM_AllReduceBf16Compressed(benchmark::State& state) {
  TimeAllReduce(state, [](DeviceGroup<Cpu>& group, int r, const Tensor<Cpu>& x) -> absl::Status {
    auto reduced = group.AllReduce(r, x.to(DType::kBF16), ReduceOp::kSum);
    if (!reduced.ok()) return reduced.status();
    benchmark::DoNotOptimize(reduced->to(DType::kF32));
    return absl::OkStatus();
  });
}

BENCHMARK(BM_Memcpy)->Arg(1)->Arg(25)->Arg(64)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllReduceKiln)->Arg(1)->Arg(25)->Arg(64)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllReduceBf16Compressed)->Arg(1)->Arg(25)->Arg(64)->UseRealTime()->Unit(benchmark::kMillisecond);

using AD = Autodiff<Cpu>;

void BM_DataParallelMlp(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  const int64_t kBatch = state.range(1) * devices;
  OneThreadPerDevice(devices);
  Generator gen(1);
  nn::Sequential<AD> model;
  model.add<nn::Linear<AD>>(784, 256, gen)
      .add<nn::ReLU<AD>>()
      .add<nn::Linear<AD>>(256, 256, gen)
      .add<nn::ReLU<AD>>()
      .add<nn::Linear<AD>>(256, 10, gen);
  std::vector<CpuDevice> list;
  for (int r = 0; r < devices; ++r) list.push_back(CpuDevice(r));
  auto dp = DataParallel<Cpu>::Create(model, std::make_shared<DeviceGroup<AD>>(list), [] {
    return std::make_unique<nn::Sgd<Cpu>>(0.01, nn::SgdOptions{.momentum = 0.9});
  });
  if (!dp.ok()) std::abort();
  const auto x = Tensor<Cpu>::uniform({kBatch, 784}, -1, 1, gen);
  const auto y = Tensor<Cpu>::uniform({kBatch}, 0, 10, gen).to(DType::kI64);
  const auto loss = [](nn::Module<AD>& m, const Tensor<AD>& xs, const Tensor<AD>& ys) {
    return nn::CrossEntropy(m(xs), ys);
  };
  for (auto _ : state) {
    if (!(*dp)->Step(x, y, loss).ok()) state.SkipWithError("step failed");
  }
  state.counters["samples/s"] = benchmark::Counter(kBatch, benchmark::Counter::kIsIterationInvariantRate);
}
// {devices, samples per device}: one device with the same per-device batch (weak scaling) and
// with the same global batch (strong scaling).
BENCHMARK(BM_DataParallelMlp)
    ->Args({1, 256})
    ->Args({2, 256})
    ->Args({1, 512})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_RecordedAllReduceOfOne(benchmark::State& state) {
  OneThreadPerDevice(1);
  DeviceGroup<Cpu> group({CpuDevice(0)}, {.flight_recorder_entries = static_cast<int>(state.range(0))});
  const Tensor<Cpu> x = Tensor<Cpu>::ones({1}, DType::kF32, CpuDevice(0));
  for (auto _ : state) {
    auto out = group.AllReduce(0, x, ReduceOp::kSum, "step 187 bucket 0");
    if (!out.ok()) state.SkipWithError("all_reduce failed");
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_RecordedAllReduceOfOne)->Arg(2048)->Arg(0)->UseRealTime();

void BM_DataParallelTinyMlp(benchmark::State& state) {
  OneThreadPerDevice(2);
  Generator gen(1);
  nn::Sequential<AD> model;
  model.add<nn::Linear<AD>>(10, 100, gen)
      .add<nn::ReLU<AD>>()
      .add<nn::Linear<AD>>(100, 100, gen)
      .add<nn::ReLU<AD>>()
      .add<nn::Linear<AD>>(100, 1, gen);
  auto group =
      std::make_shared<DeviceGroup<AD>>(std::vector<CpuDevice>{CpuDevice(0), CpuDevice(1)},
                                        GroupOptions{.flight_recorder_entries = static_cast<int>(state.range(0))});
  auto dp = DataParallel<Cpu>::Create(
      model, group, [] { return std::make_unique<nn::Sgd<Cpu>>(0.01, nn::SgdOptions{.momentum = 0.9}); });
  if (!dp.ok()) std::abort();
  const auto x = Tensor<Cpu>::uniform({128, 10}, -1, 1, gen);
  const auto y = Tensor<Cpu>::uniform({128, 1}, -1, 1, gen);
  const auto loss = [](nn::Module<AD>& m, const Tensor<AD>& xs, const Tensor<AD>& ys) {
    return nn::MeanSquaredError(m(xs), ys);
  };
  for (auto _ : state) {
    if (!(*dp)->Step(x, y, loss).ok()) state.SkipWithError("step failed");
  }
}
BENCHMARK(BM_DataParallelTinyMlp)->Arg(2048)->Arg(0)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln::distributed
