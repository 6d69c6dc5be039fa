// ZeRO-3's step time against DDP's across processes: a GPT trained data-parallel over Gloo,
// one device (one thread) per process, every variant on the same process group, stepped in
// turn (a new random order each round, the same on every rank) so drift hits all alike:
//   ddp            every member holds and updates everything (the reference)
//   ddp+recompute  the same with every block recomputed in backward (ZeRO-3's compute, no sharding)
//   zero3          parameters sharded, each block gathered before forward, freed, gathered again
//                  and recomputed in backward, the next block's gather prefetched
//   zero3 no-pf    the same without prefetch
//   zero3 keep     without resharding after forward: one gather per block, no recompute
// Prints each variant's median step (rank 0), its ratio to DDP's, and one JSON line.
//
//   ./bazelw build //bench:zero3_step //tools:launch
//   bazel-bin/tools/launch --nproc=2 -- bazel-bin/bench/zero3_step [--layers=4 --width=128 ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_device.h"
#include "distributed/data_parallel.h"
#include "distributed/gloo/gloo_process_group.h"
#include "distributed/process/launch_env.h"
#include "nn/functional.h"
#include "nn/gpt.h"

ABSL_FLAG(int, layers, 4, "transformer blocks");
ABSL_FLAG(int, width, 128, "model width");
ABSL_FLAG(int, heads, 4, "attention heads");
ABSL_FLAG(int, context, 64, "sequence length");
ABSL_FLAG(int, batch, 32, "global batch (sequences)");
ABSL_FLAG(int, rounds, 12, "timed steps per variant (after 2 warm-up steps)");

namespace kiln {
namespace {

using ADB = Autodiff<Cpu>;
using distributed::DataParallel;
using distributed::Sharding;

struct Variant {
  std::string name;
  std::unique_ptr<DataParallel<Cpu>> dp;
  std::vector<double> ms;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Rank 0's table and one JSON line.
void Report(nn::Gpt<ADB>& model, const nn::GptConfig& config, const std::vector<Variant>& variants) {
  std::printf("GPT %lld parameters (%lld blocks, width %lld, context %lld), global batch %d, 2 processes over Gloo\n",
              static_cast<long long>(model.parameter_count()), static_cast<long long>(config.layers),
              static_cast<long long>(config.width), static_cast<long long>(config.context), absl::GetFlag(FLAGS_batch));
  const double ddp = Median(variants[0].ms);
  std::vector<std::string> json;
  for (const Variant& v : variants) {
    std::printf("%-14s %10.2f ms  %6.3fx DDP\n", v.name.c_str(), Median(v.ms), Median(v.ms) / ddp);
    json.push_back(absl::StrFormat("\"%s\":%.3f", v.name, Median(v.ms)));
  }
  std::printf("{\"step_ms\":{%s},\"zero3_of_ddp\":%.4f}\n", absl::StrJoin(json, ",").c_str(),
              Median(variants[2].ms) / ddp);
}

int Main() {
  auto env = distributed::ReadLaunchEnv();
  if (!env.ok() || !env->has_value()) {
    std::fprintf(stderr, "run me under tools/launch\n");
    return 2;
  }
  ThrowIfError(cpu::Configure({.devices = 1, .threads_per_device = 1}));
  auto world =
      distributed::GlooProcessGroup::Connect(distributed::ProcessGroupOptions::From(**env, std::chrono::seconds(120)));
  ThrowIfError(world.status());
  const bool lead = (*world)->rank() == 0;
  const nn::GptConfig config{.context = absl::GetFlag(FLAGS_context),
                             .layers = absl::GetFlag(FLAGS_layers),
                             .heads = absl::GetFlag(FLAGS_heads),
                             .width = absl::GetFlag(FLAGS_width)};
  Generator gen(1);
  nn::Gpt<ADB> model(config, gen, CpuDevice(0));
  nn::Gpt<ADB> recomputed(config, gen, CpuDevice(0));
  recomputed.set_recompute(true);
  auto group = std::make_shared<distributed::DeviceGroup<ADB>>(std::vector<CpuDevice>{CpuDevice(0)},
                                                               distributed::GroupOptions{.process_group = *world});
  const auto adamw = [] { return std::make_unique<nn::AdamW<Cpu>>(1e-3); };
  std::vector<Variant> variants;
  auto add = [&](std::string name, const nn::Gpt<ADB>& m, distributed::SyncOptions options) {
    auto dp = DataParallel<Cpu>::Create(m, group, adamw, options);
    ThrowIfError(dp.status());
    variants.push_back({std::move(name), *std::move(dp), {}});
  };
  add("ddp", model, {});
  add("ddp+recompute", recomputed, {});
  add("zero3", model, {.sharding = Sharding::kParameters});
  add("zero3 no-pf", model, {.sharding = Sharding::kParameters, .parameters = {.prefetch = false}});
  add("zero3 keep", model, {.sharding = Sharding::kParameters, .parameters = {.reshard_after_forward = false}});
  const auto x = Tensor<Cpu>::uniform({absl::GetFlag(FLAGS_batch), config.context}, 0, 256, gen).to(DType::kI64);
  const auto loss = [](nn::Module<ADB>& m, const Tensor<ADB>& in, const Tensor<ADB>& y) {
    return nn::functional::cross_entropy(m(in).reshape({-1, 256}), y.reshape({-1}));
  };
  std::mt19937 order_gen(7);  // the same order on every rank
  std::vector<size_t> order(variants.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const int rounds = absl::GetFlag(FLAGS_rounds);
  for (int round = 0; round < rounds + 2; ++round) {
    std::shuffle(order.begin(), order.end(), order_gen);
    for (size_t i : order) {
      const auto start = std::chrono::steady_clock::now();
      ThrowIfError(variants[i].dp->Step(x, x, loss).status());
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (round >= 2) variants[i].ms.push_back(ms);
    }
    if (lead) std::fprintf(stderr, "round %d of %d\n", round + 1, rounds + 2);
  }
  if (lead) Report(model, config, variants);
  return 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return kiln::Main();
}
