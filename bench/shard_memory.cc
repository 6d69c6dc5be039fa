// Model-state bytes per member under each sharding stage (distributed/sharding.h): a GPT of
// about 25M parameters trained data-parallel over N = 2 and 4 logical CPU devices, one step
// per configuration. For each stage and N it measures what member 0 holds after a step: its
// replica's parameters, its optimizer state (every slot tensor), and the gradients its sync
// hands it (whole, or its chunks), and compares their sum with DDP's and with the bounds of
// ZeRO's stages: optimizer (4 + 4 + 8/N)/16 of DDP's, gradients (4 + 12/N)/16, each plus 5%,
// parameters (ZeRO-3) 1.1/N plus one block's gathered parameters.
// It also measures the allocator's peak during a step (activations and transients included)
// on cpu:1, member 1's device, and holds it to the same bound against DDP's. Members in one
// process share what a collective hands every member (DDP's reduced gradients, a sharded
// step's gathered parameters) and the engine counts that on cpu:0, so the peak of every
// device is printed too; examples/gpt under tools/launch (one member a process, nothing
// shared) gives the same comparison without that (README). Each stage runs with its default
// bucket size (gradient_sync.h's BucketBytes) unless --bucket_kib says otherwise.
// Prints a table and one JSON line; exits 1 when a bound is missed.
//
//   ./bazelw run -c opt //bench:shard_memory [-- --layers=8 --width=512]
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_device.h"
#include "distributed/data_parallel.h"
#include "nn/functional.h"
#include "nn/gpt.h"

ABSL_FLAG(int, layers, 8, "transformer blocks");
ABSL_FLAG(int, width, 512, "model width (8 heads)");
ABSL_FLAG(int64_t, bucket_kib, 0, "gradient bucket size in KiB (0: SyncOptions' default)");

namespace kiln {
namespace {

using ADB = Autodiff<Cpu>;
using distributed::Sharding;

struct Held {
  double parameters = 0, gradients = 0, optimizer = 0;
  double peak = 0;            // device cpu:1's allocator peak during the second step (activations included)
  std::vector<double> peaks;  // every device's allocator peak during the second step
  double total() const { return parameters + gradients + optimizer; }
};

distributed::SyncOptions Options(Sharding stage) {
  distributed::SyncOptions options{.sharding = stage};
  if (const int64_t kib = absl::GetFlag(FLAGS_bucket_kib); kib > 0) options.bucket_bytes = kib << 10;
  return options;
}

// What member 0 of a `members`-member run of `stage` holds after one step.
Held MeasureOneStep(const nn::Gpt<ADB>& model, int members, Sharding stage) {
  std::vector<CpuDevice> devices;
  for (int r = 0; r < members; ++r) devices.push_back(CpuDevice(r));
  auto dp = distributed::DataParallel<Cpu>::Create(
      model, std::make_shared<distributed::DeviceGroup<ADB>>(devices),
      [] { return std::make_unique<nn::AdamW<Cpu>>(1e-3); }, Options(stage));
  ThrowIfError(dp.status());
  Generator gen(2);
  const int64_t context = 64;
  const auto x = Tensor<Cpu>::uniform({members, context}, 0, 256, gen, DType::kF32, devices[0]).to(DType::kI64);
  const auto loss = [](nn::Module<ADB>& m, const Tensor<ADB>& in, const Tensor<ADB>& y) {
    return nn::functional::cross_entropy(m(in).reshape({-1, 256}), y.reshape({-1}));
  };
  ThrowIfError((*dp)->Step(x, x, loss).status());
  // The first step moved every member's parameters onto its own device (clone_to shares the
  // first device's buffers until then); the second shows a step's peak.
  for (const CpuDevice& d : devices) Cpu::reset_peak_memory(d);
  ThrowIfError((*dp)->Step(x, x, loss).status());
  Held held;
  held.peak = static_cast<double>(Cpu::memory_usage(devices[1]).peak_bytes);
  for (const CpuDevice& d : devices) held.peaks.push_back(static_cast<double>(Cpu::memory_usage(d).peak_bytes));
  for (auto& [name, p] : (*dp)->replica(0).named_parameters()) {
    // The sync's layout: whole gradients unsharded, each parameter's chunk sharded; ZeRO-3
    // keeps only its chunk of the parameters too (the replica holds placeholders).
    const int64_t chunk = distributed::ChunkSize(p->numel(), members);
    held.parameters += static_cast<double>(stage == Sharding::kParameters ? chunk : p->numel()) * 4;
    held.gradients += static_cast<double>(stage == Sharding::kNone ? p->numel() : chunk) * 4;
  }
  for (const auto& [key, t] : (*dp)->optimizer(0).state()) {
    held.optimizer += static_cast<double>(t.numel()) * DTypeSize(t.dtype());
  }
  return held;
}

int Main() {
  const nn::GptConfig config{
      .context = 64, .layers = absl::GetFlag(FLAGS_layers), .heads = 8, .width = absl::GetFlag(FLAGS_width)};
  ThrowIfError(cpu::Configure({.devices = 4, .threads_per_device = 1}));
  Generator gen(1);
  const nn::Gpt<ADB> model(config, gen, CpuDevice(0));
  const int64_t params = const_cast<nn::Gpt<ADB>&>(model).parameter_count();
  std::printf("GPT of %lld parameters (%d blocks, width %lld), AdamW, f32; bytes member 0 holds after a step\n",
              static_cast<long long>(params), static_cast<int>(config.layers), static_cast<long long>(config.width));
  std::printf("%-3s %-10s %12s %12s %12s %12s %8s %8s %14s %8s   %s\n", "N", "stage", "parameters", "gradients",
              "optimizer", "total", "of DDP", "bound", "peak (cpu:1)", "of DDP", "each device's peak, of DDP's");
  // ZeRO-3's bound allows one block's gathered parameters (f32) beside 1.1/N of DDP's state.
  const double block_bytes = 12.0 * static_cast<double>(config.width * config.width) * 4;
  bool ok = true;
  std::vector<std::string> json;
  for (int n : {2, 4}) {
    const Held ddp = MeasureOneStep(model, n, Sharding::kNone);
    for (Sharding stage : {Sharding::kNone, Sharding::kOptimizer, Sharding::kGradients, Sharding::kParameters}) {
      const Held h = stage == Sharding::kNone ? ddp : MeasureOneStep(model, n, stage);
      const double ratio = h.total() / ddp.total();
      const double bound = stage == Sharding::kNone        ? 1.0
                           : stage == Sharding::kOptimizer ? (4 + 4 + 8.0 / n) / 16 + 0.05
                           : stage == Sharding::kGradients ? (4 + 12.0 / n) / 16 + 0.05
                                                           : 1.1 / n + block_bytes / ddp.total();
      const double peak_ratio = h.peak / ddp.peak;
      ok = ok && ratio <= bound && peak_ratio <= bound;
      std::printf("%-3d %-10s %12.0f %12.0f %12.0f %12.0f %8.3f %8.3f %14.0f %8.3f  ", n,
                  distributed::ShardingName(stage), h.parameters, h.gradients, h.optimizer, h.total(), ratio, bound,
                  h.peak, peak_ratio);
      for (size_t d = 0; d < h.peaks.size(); ++d) std::printf(" %.3f", h.peaks[d] / ddp.peaks[d]);
      std::printf("\n");
      json.push_back(absl::StrFormat(
          "{\"members\":%d,\"stage\":\"%s\",\"bytes\":%.0f,\"of_ddp\":%.4f,\"peak_bytes\":%.0f,\"peak_of_ddp\":%.4f}",
          n, distributed::ShardingName(stage), h.total(), ratio, h.peak, peak_ratio));
    }
  }
  std::printf("{\"parameters\":%lld,\"runs\":[%s],\"within_bounds\":%s}\n", static_cast<long long>(params),
              absl::StrJoin(json, ",").c_str(), ok ? "true" : "false");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return kiln::Main();
}
