// Issue 30's benchmark: examples/gpt's training step (bench/gpt_step.h) at the default and the
// larger configuration, in f32 and bf16, on cpu:0 with 2 threads, beside kiln's own GEMM at the
// step's largest GEMM shape in the same run; then a breakdown of one step per configuration
// (bench/op_profile.h), measured on a separate, profiled copy of the step so the timed cases
// run the plain backend. bench/gpt_utilisation.py turns the JSON into the utilisation table:
//
//   ./bazelw run //bench:gpt_step_bench -- --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true --benchmark_out=/tmp/gpt_step.json
//   /usr/bin/python3 bench/gpt_utilisation.py /tmp/gpt_step.json
//
// Own flags: --breakdown=default,large (the configurations to break down; "none": skip),
// --breakdown_steps=N (profiled steps averaged, default 3), --breakdown_ops=N (slowest ops
// listed, default 12).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backends/cpu/cpu_backend.h"
#include "bench/gpt_step.h"
#include "bench/op_profile.h"
#include "bench/profiled_backend.h"

namespace kiln::bench {
namespace {

constexpr int kThreads = 2;
constexpr int kWarmupSteps = 2;  // the first steps fill the allocator's cache and AdamW's state

std::vector<GptBenchConfig> Configs() { return {DefaultGpt(), LargeGpt()}; }
const nn::Precision kPrecisions[] = {nn::Precision::kF32, nn::Precision::kBF16};

void ConfigureCpu() {
  if (absl::Status s = cpu::Configure({.devices = 1, .threads_per_device = kThreads}); !s.ok()) {
    std::fprintf(stderr, "gpt_step_bench: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
}

// One warm step per (configuration, precision), kept across repetitions: building and warming
// the larger model takes seconds.
GptStep<Cpu>& WarmStep(const GptBenchConfig& c, nn::Precision precision) {
  static auto* steps = new std::map<std::string, std::unique_ptr<GptStep<Cpu>>>();
  auto& slot = (*steps)[c.name + nn::PrecisionName(precision)];
  if (slot == nullptr) {
    slot = std::make_unique<GptStep<Cpu>>(c, precision, /*profiled=*/false);
    for (int i = 0; i < kWarmupSteps; ++i) slot->Step();
  }
  return *slot;
}

void BM_GptStep(benchmark::State& state, const GptBenchConfig& c, nn::Precision precision) {
  ConfigureCpu();
  GptStep<Cpu>& step = WarmStep(c, precision);
  double loss = 0;
  for (auto _ : state) loss = step.Step();
  state.counters["loss"] = loss;
  state.counters["tokens/s"] = benchmark::Counter(c.tokens(), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["model_FLOP/s"] =
      benchmark::Counter(step.model_flops_per_step(), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flop_params"] = step.flop_parameters();
  state.counters["model_flops_per_step"] = step.model_flops_per_step();
  state.SetLabel(absl::StrFormat("%s, %s: %d blocks, width %d, %d heads, context %d, batch %d", c.name,
                                 nn::PrecisionName(precision), c.model.layers, c.model.width, c.model.heads,
                                 c.model.context, c.batch));
}

// Tensor<Cpu>::matmul at the step's largest GEMM shape (LargestGemm), inputs in `dtype`, the
// right operand a transposed view of an [n, k] weight, as nn::Linear multiplies.
void BM_Gemm(benchmark::State& state, const GptBenchConfig& c, DType dtype) {
  ConfigureCpu();
  const GemmShape g = LargestGemm(c);
  Generator gen(7);
  const auto a = Tensor<Cpu>::uniform({g.m, g.k}, -1, 1, gen).to(dtype);
  const auto b = Tensor<Cpu>::uniform({g.n, g.k}, -1, 1, gen).to(dtype).transpose(0, 1);
  benchmark::DoNotOptimize(a.matmul(b));  // warm: the output buffer comes from the cache after
  for (auto _ : state) benchmark::DoNotOptimize(a.matmul(b));
  state.counters["FLOP/s"] = benchmark::Counter(g.flops(), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flops_per_call"] = g.flops();
  state.SetLabel(
      absl::StrFormat("%s, %s: %s = [%d, %d] x [%d, %d]^T", c.name, DTypeName(dtype), g.what, g.m, g.k, g.n, g.k));
}

// Wall time is what the rates count; every thread's CPU time is reported too (the JSON's
// cpu_time): on a shared machine other programs' turns inflate the wall time more than the
// CPU-seconds of the work (gpt_utilisation.py gives the utilisation both ways).
void RegisterBenchmarks() {
  for (const GptBenchConfig& c : Configs()) {
    for (nn::Precision p : kPrecisions) {
      benchmark::RegisterBenchmark(absl::StrCat("BM_GptStep/", c.name, "/", nn::PrecisionName(p)).c_str(),
                                   [c, p](benchmark::State& s) { BM_GptStep(s, c, p); })
          ->UseRealTime()
          ->MeasureProcessCPUTime()
          ->Unit(benchmark::kMillisecond);
    }
    for (DType d : {DType::kF32, DType::kBF16}) {
      benchmark::RegisterBenchmark(absl::StrCat("BM_Gemm/", c.name, "/", DTypeName(d)).c_str(),
                                   [c, d](benchmark::State& s) { BM_Gemm(s, c, d); })
          ->UseRealTime()
          ->MeasureProcessCPUTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

struct BreakdownFlags {
  std::vector<std::string> configs = {"default", "large"};
  int steps = 3;
  int top_ops = 12;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr, "gpt_step_bench: %s\n", why.c_str());
  std::exit(2);
}

// Takes --breakdown* out of argv (Google Benchmark rejects flags it does not know).
BreakdownFlags ParseBreakdownFlags(int& argc, char** argv) {
  BreakdownFlags f;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> std::optional<std::string> {
      const std::string prefix = absl::StrCat("--", name, "=");
      if (arg.rfind(prefix, 0) != 0) return std::nullopt;
      return arg.substr(prefix.size());
    };
    auto count = [&](const char* name, const std::string& v, int hi) {
      int n = 0;
      if (!absl::SimpleAtoi(v, &n) || n < 1 || n > hi) Usage(absl::StrCat("--", name, "=", v, ": expected 1..", hi));
      return n;
    };
    if (auto v = value("breakdown")) {
      f.configs.clear();
      if (*v == "none") continue;
      for (absl::string_view name : absl::StrSplit(*v, ',')) {
        if (name != "default" && name != "large") {
          Usage(absl::StrCat("--breakdown=", *v, ": expected configurations among default,large, or none"));
        }
        f.configs.emplace_back(name);
      }
    } else if (auto v = value("breakdown_steps")) {
      f.steps = count("breakdown_steps", *v, 1000);
    } else if (auto v = value("breakdown_ops")) {
      f.top_ops = count("breakdown_ops", *v, kOpCount);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return f;
}

// Profiled steps (Profiled<Cpu>), interleaved with plain ones to show what the profiler costs.
void PrintBreakdown(const GptBenchConfig& c, nn::Precision precision, const BreakdownFlags& flags) {
  GptStep<Profiled<Cpu>> profiled(c, precision, /*profiled=*/true);
  GptStep<Cpu>& plain = WarmStep(c, precision);
  for (int i = 0; i < kWarmupSteps; ++i) profiled.Step();
  Profile total;
  std::vector<double> plain_ms;
  for (int i = 0; i < flags.steps; ++i) {
    OpProfile::Start();
    profiled.Step();
    total += OpProfile::Stop();
    const int64_t start = cpu::profile_internal::NowNs();
    plain.Step();
    plain_ms.push_back((cpu::profile_internal::NowNs() - start) * 1e-6);
  }
  std::sort(plain_ms.begin(), plain_ms.end());
  std::printf(
      "\nBreakdown of one step: %s, %s (%d blocks, width %d, %d heads, context %d, batch %d), cpu:0, %d threads, "
      "mean of %d profiled steps\n",
      c.name.c_str(), nn::PrecisionName(precision), static_cast<int>(c.model.layers), static_cast<int>(c.model.width),
      static_cast<int>(c.model.heads), static_cast<int>(c.model.context), static_cast<int>(c.batch), kThreads,
      flags.steps);
  std::printf("%s", FormatProfile(total, flags.steps, flags.top_ops).c_str());
  std::printf("  unprofiled step, interleaved: median %.2f ms (the profiled step's extra time is in the rest)\n",
              plain_ms[plain_ms.size() / 2]);
  std::fflush(stdout);
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  using namespace kiln::bench;
  const BreakdownFlags flags = ParseBreakdownFlags(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  RegisterBenchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  ConfigureCpu();
  for (const GptBenchConfig& c : Configs()) {
    if (std::find(flags.configs.begin(), flags.configs.end(), c.name) == flags.configs.end()) continue;
    for (kiln::nn::Precision p : kPrecisions) PrintBreakdown(c, p, flags);
  }
  return 0;
}
