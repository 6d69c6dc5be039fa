// Sampling from the default GPT (4 blocks, width 128, 4 heads; examples/gpt's) with and without
// the key-value cache, side by side: tokens per second generating context - 8 tokens after an
// 8-token prompt, at context 64 and 256 (the cache runs one position per token, the window
// grows to the context without it). Threads: KILN_THREADS or all cores.
//
//   ./bazelw run //bench:generate_bench
#include <benchmark/benchmark.h>

#include "backends/cpu/cpu_backend.h"
#include "nn/generate.h"

namespace kiln {
namespace {

using ADB = Autodiff<Cpu>;

void BM_Generate(benchmark::State& state, bool cached) {
  const int64_t context = state.range(0);
  Generator init(1);
  nn::Gpt<ADB> model({.context = context, .layers = 4, .heads = 4, .width = 128}, init);
  const int count = static_cast<int>(context) - 8;
  for (auto _ : state) {
    Generator gen(2);
    benchmark::DoNotOptimize(nn::Generate(model, {10, 65, 58, 32, 84, 104, 101, 32}, count, gen, {.kv_cache = cached}));
  }
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(count) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_Generate, cached, true)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Generate, uncached, false)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace kiln

BENCHMARK_MAIN();
