// examples/gpt's data, in memory (the fortunes corpus as --data_dir reads it: the bytes in a
// vector, random windows) against memory-mapped token files (--train_data: the same bytes as a
// nanoGPT .bin written by data::WriteTokenFile, and the text file itself; the window order of
// data/window_sampler.h): the time to build one batch of the default run (32 x 64), and one
// whole training step of the default GPT (4 layers, width 128, 2 threads) with each source.
//   ./bazelw build //bench:token_data_bench && bazel-bin/bench/token_data_bench
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "autodiff/autodiff.h"
#include "backends/cpu/cpu_backend.h"
#include "data/text_corpus.h"
#include "data/token_dataset.h"
#include "data/token_writer.h"
#include "data/window_sampler.h"
#include "examples/gpt_token_data.h"
#include "nn/functional.h"
#include "nn/gpt.h"
#include "nn/optim.h"

namespace kiln {
namespace {

using AD = Autodiff<Cpu>;
using T = Tensor<AD>;
constexpr int kBatch = 32;
constexpr nn::GptConfig kGpt{.vocab = 256, .context = 64, .layers = 4, .heads = 4, .width = 128};

// The corpus once: its bytes in memory, and written to a .bin and a text file under /tmp.
struct Corpus {
  std::vector<uint8_t> bytes;
  std::string text_path, bin_path;
};

const Corpus& TheCorpus() {
  static const Corpus* corpus = [] {
    auto text = data::LoadTextCorpus(data::kFortunesDir);
    if (!text.ok()) std::abort();
    auto* c = new Corpus{.bytes = text->bytes};
    const std::string dir = "/tmp/kiln_token_data_bench_" + std::to_string(getpid());
    c->text_path = dir + ".txt";
    c->bin_path = dir + ".bin";
    static std::string paths[2] = {c->text_path, c->bin_path};
    std::atexit([] {
      for (const std::string& p : paths) unlink(p.c_str());
    });
    std::ofstream(c->text_path, std::ios::binary)
        .write(reinterpret_cast<const char*>(c->bytes.data()), static_cast<std::streamsize>(c->bytes.size()));
    auto source = data::TokenDataset::Open(c->text_path);
    if (!source.ok() || !data::WriteTokenFile(c->bin_path, data::TokenFormat::kRaw, *source, 0, source->size()).ok()) {
      std::abort();
    }
    return c;
  }();
  return *corpus;
}

// A source of batches: `Next` gives the inputs and targets of the next one.
class Batches {
 public:
  virtual ~Batches() = default;
  virtual std::pair<Tensor<Cpu>, Tensor<Cpu>> Next() = 0;
};

// As examples/gpt draws from --data_dir: a generator's random starts into the bytes.
class InMemory : public Batches {
 public:
  std::pair<Tensor<Cpu>, Tensor<Cpu>> Next() override {
    const std::vector<uint8_t>& bytes = TheCorpus().bytes;
    std::vector<int64_t> x, y;
    for (int i = 0; i < kBatch; ++i) {
      const int64_t s = static_cast<int64_t>(gen_.NextU64() % (bytes.size() - kGpt.context - 1));
      for (int64_t j = 0; j < kGpt.context; ++j) {
        x.push_back(bytes[s + j]);
        y.push_back(bytes[s + j + 1]);
      }
    }
    return {Tensor<Cpu>::from_vector(x, {kBatch, kGpt.context}), Tensor<Cpu>::from_vector(y, {kBatch, kGpt.context})};
  }

 private:
  Generator gen_{2};
};

// As examples/gpt draws from --train_data: the window order over a memory-mapped file.
class Mapped : public Batches {
 public:
  explicit Mapped(const std::string& path)
      : tokens_(*data::TokenDataset::Open(path)),
        sampler_(*data::WindowSampler::Create(tokens_.size(), kGpt.context, 2)) {
    tokens_.AdviseRandom();
  }
  std::pair<Tensor<Cpu>, Tensor<Cpu>> Next() override {
    return Windows<Cpu>(tokens_, sampler_.Next(kBatch, at_), kGpt.context, Cpu::Device{});
  }

 private:
  data::TokenDataset tokens_;
  data::WindowSampler sampler_;
  data::SamplerPosition at_;
};

std::unique_ptr<Batches> MakeBatches(int source) {
  if (source == 0) return std::make_unique<InMemory>();
  return std::make_unique<Mapped>(source == 1 ? TheCorpus().bin_path : TheCorpus().text_path);
}

void BM_Batch(benchmark::State& state) {
  std::unique_ptr<Batches> batches = MakeBatches(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(batches->Next());
  state.counters["tokens_per_sec"] =
      benchmark::Counter(static_cast<double>(kBatch) * kGpt.context, benchmark::Counter::kIsIterationInvariantRate);
}

T Loss(nn::Gpt<AD>& gpt, const T& x, const T& y) {
  const T logits = gpt(x);
  return nn::functional::cross_entropy(logits.reshape({-1, kGpt.vocab}), y.reshape({-1}));
}

// One training step with its batch drawn from the source, as examples/gpt runs it.
void BM_GptStep(benchmark::State& state) {
  if (!cpu::Configure({.devices = 1, .threads_per_device = 2}).ok()) std::abort();
  std::unique_ptr<Batches> batches = MakeBatches(static_cast<int>(state.range(0)));
  Generator gen(1);
  nn::Gpt<AD> gpt(kGpt, gen);
  nn::AdamW<Cpu> adamw(1e-3, {.beta2 = 0.99, .weight_decay = 0.1, .decays = nn::DecayOnlyMatrices});
  auto step = [&] {
    const auto [x, y] = batches->Next();
    adamw.step(gpt, Loss(gpt, T::from_inner(x), T::from_inner(y)).backward());
  };
  step();  // AdamW's moments exist before measuring
  for (auto _ : state) step();
  state.counters["tokens_per_sec"] =
      benchmark::Counter(static_cast<double>(kBatch) * kGpt.context, benchmark::Counter::kIsIterationInvariantRate);
}

// 0: in memory, 1: nanoGPT .bin mapped, 2: the text file mapped; interleaved so that a machine
// busy with other work slows each alike.
BENCHMARK(BM_Batch)->ArgName("source")->Arg(0)->Arg(1)->Arg(2)->Arg(0)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_GptStep)
    ->ArgName("source")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln
