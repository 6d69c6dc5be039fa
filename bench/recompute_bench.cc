// One training step of examples/gpt's default GPT (batch 32, context 64, 4 layers, width 128,
// 4 heads; AdamW as examples/gpt sets it) with every block stored and with every block
// recomputed in backward (--recompute), side by side, on 2 threads. Besides the time, each
// reports `kept_bytes`: what the forward leaves allocated for backward (activations, logits
// and loss), measured by glibc's in-use bytes around one forward with kiln's buffer cache
// emptied before and after, so that only what is still referenced counts.
//   ./bazelw build //bench:recompute_bench && bazel-bin/bench/recompute_bench
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdlib>

#include "autodiff/autodiff.h"
#include "backends/cpu/allocator.h"
#include "backends/cpu/cpu_backend.h"
#include "nn/functional.h"
#include "nn/gpt.h"
#include "nn/optim.h"

namespace kiln {
namespace {

using AD = Autodiff<Cpu>;
using T = Tensor<AD>;
constexpr int kThreads = 2;
constexpr int64_t kBatch = 32;
constexpr nn::GptConfig kGpt{.vocab = 256, .context = 64, .layers = 4, .heads = 4, .width = 128};

int64_t InUseBytes() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

T Loss(nn::Gpt<AD>& gpt, const T& x, const T& y) {
  const T logits = gpt(x);
  return nn::functional::cross_entropy(logits.reshape({-1, kGpt.vocab}), y.reshape({-1}));
}

void BM_GptStep(benchmark::State& state, bool recompute) {
  if (!cpu::Configure({.devices = 1, .threads_per_device = kThreads}).ok()) std::abort();
  Generator gen(1);
  nn::GptConfig config = kGpt;
  config.recompute = recompute;
  nn::Gpt<AD> gpt(config, gen);
  const auto ids = [&] {
    return T::from_inner(Tensor<Cpu>::uniform({kBatch, kGpt.context}, 0, kGpt.vocab, gen).to(DType::kI64));
  };
  const T x = ids(), y = ids();
  nn::AdamW<Cpu> adamw(1e-3, {.beta2 = 0.99, .weight_decay = 0.1, .decays = nn::DecayOnlyMatrices});
  adamw.step(gpt, Loss(gpt, x, y).backward());  // AdamW's moments exist before measuring
  cpu::ReleaseCachedBuffers();
  const int64_t before = InUseBytes();
  {
    const T loss = Loss(gpt, x, y);
    cpu::ReleaseCachedBuffers();
    state.counters["kept_bytes"] = static_cast<double>(InUseBytes() - before);
    adamw.step(gpt, loss.backward());
  }
  for (auto _ : state) adamw.step(gpt, Loss(gpt, x, y).backward());
}
BENCHMARK_CAPTURE(BM_GptStep, stored, false)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_GptStep, recompute, true)->UseRealTime()->MeasureProcessCPUTime();

}  // namespace
}  // namespace kiln
