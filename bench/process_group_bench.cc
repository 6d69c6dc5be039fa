// All-reduce (sum, f32) across processes: kiln's Gloo process group next to raw Gloo in the
// same run, plus the in-process group for contrast. Run it under the launcher, one device per
// process:
//
//   ./bazelw build //bench:process_group_bench //tools:launch
//   bazel-bin/tools/launch --nproc=2 -- bazel-bin/bench/process_group_bench [rounds]
//
// Raw Gloo runs on connections of its own, with each of its all-reduce algorithms: ring and
// bcube through gloo::allreduce (in place, and from a separate input), and the classic ring,
// chunked ring and halving-doubling classes (in place). kiln is timed keeping its input (the
// result is a new tensor, as every kiln collective returns) and consuming a fresh input
// (std::move, as gradient sync hands over its buckets), which it reduces in place; a third row
// times the agreement on a call alone. Each kiln call is compared with the fastest raw variant
// of its kind. Every round runs the variants in a new random order (the same on every rank),
// so drift hits all alike; medians, p10 and p90 of rank 0's calls are printed.
// SIZES_KIB=4,1024 and VARIANT=<part of a name> narrow the run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "distributed/device_group.h"
#include "distributed/gloo/gloo_process_group.h"
#include "distributed/member_threads.h"
#include "distributed/process/launch_env.h"
#include "gloo/allreduce.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"

namespace kiln::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1) + 0.5)];
}

double Median(const std::vector<double>& v) { return Quantile(v, 0.5); }

std::string SizeName(int64_t bytes) {
  return bytes >= (1 << 20) ? absl::StrCat(bytes >> 20, " MiB") : absl::StrCat(bytes >> 10, " KiB");
}

// SIZES_KIB=4,1024 as bytes; empty when unset.
std::vector<int64_t> SizesFromEnv() {
  std::vector<int64_t> sizes;
  for (const char* s = std::getenv("SIZES_KIB"); s != nullptr && *s;) {
    sizes.push_back(std::strtoll(s, const_cast<char**>(&s), 10) << 10);
    if (*s == ',') ++s;
  }
  return sizes;
}

// What the variants of one size run on: raw Gloo's buffers and algorithm objects, kiln's inputs.
struct Buffers {
  Buffers(const std::shared_ptr<gloo::Context>& context, int64_t n)
      : n(n),
        buffer(n, 1.0f),
        second(n, 1.0f),
        data(buffer.data()),
        input(Tensor<Cpu>::full({n}, 1.0f, DType::kF32, CpuDevice(0))),
        fresh(input),
        classic_ring(context, {data}, static_cast<int>(n)),
        chunked(context, {data}, static_cast<int>(n)),
        halving(context, {data}, static_cast<int>(n)) {}

  const int64_t n;
  std::vector<float> buffer, second;
  float* const data;
  const Tensor<Cpu> input;
  // The consuming call's input, made fresh (untimed) before each of its calls, as gradient
  // sync's buckets are.
  Tensor<Cpu> fresh;
  gloo::AllreduceRing<float> classic_ring;
  gloo::AllreduceRingChunked<float> chunked;
  gloo::AllreduceHalvingDoubling<float> halving;
};

struct Variant {
  std::string name;
  bool keeps_input;  // leaves its input untouched (the result goes elsewhere)
  std::function<void()> run;
};

// Every variant timed at one size: raw Gloo's, then kiln's.
std::vector<Variant> Variants(const std::shared_ptr<gloo::Context>& context, Buffers& b, DeviceGroup<Cpu>& group,
                              GlooProcessGroup& world) {
  // gloo::allreduce into `data`, in place or from `second`.
  auto modern = [&context, &b](gloo::AllreduceOptions::Algorithm algorithm, bool separate) {
    gloo::AllreduceOptions opts(context);
    if (separate) opts.setInput(b.second.data(), b.n);
    opts.setOutput(b.data, b.n);
    opts.setAlgorithm(algorithm);
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(opts);
  };
  return {
      {"gloo allreduce ring", false, [=] { modern(gloo::AllreduceOptions::Algorithm::RING, false); }},
      {"gloo allreduce bcube", false, [=] { modern(gloo::AllreduceOptions::Algorithm::BCUBE, false); }},
      {"gloo allreduce ring in->out", true, [=] { modern(gloo::AllreduceOptions::Algorithm::RING, true); }},
      {"gloo allreduce bcube in->out", true, [=] { modern(gloo::AllreduceOptions::Algorithm::BCUBE, true); }},
      {"gloo AllreduceRing", false, [&b] { b.classic_ring.run(); }},
      {"gloo AllreduceRingChunked", false, [&b] { b.chunked.run(); }},
      {"gloo AllreduceHalvingDoubling", false, [&b] { b.halving.run(); }},
      {"kiln all_reduce", true,
       [&] {
         auto out = group.AllReduce(0, b.input, ReduceOp::kSum);
         if (!out.ok()) {
           std::fprintf(stderr, "%s\n", std::string(out.status().message()).c_str());
           std::exit(1);
         }
       }},
      {"kiln all_reduce, consuming", false,
       [&] {
         auto out = group.AllReduce(0, std::move(b.fresh), ReduceOp::kSum);
         if (!out.ok()) std::exit(1);
       }},
      // Gradient sync's bf16 compression: the f32 values rounded to bf16, half the bytes
      // all-reduced, the sum widened back to f32.
      {"kiln all_reduce, bf16 + casts", true,
       [&] {
         auto out = group.AllReduce(0, b.input.to(DType::kBF16), ReduceOp::kSum);
         if (!out.ok()) std::exit(1);
         const Tensor<Cpu> widened = out->to(DType::kF32);
       }},
      {"kiln agreement alone", false,
       [&] {
         if (!world.Agree("all_reduce(sum) of f32[n] on 1 local device(s)").ok()) std::exit(1);
       }},
  };
}

using Times = std::map<std::string, std::vector<double>>;

// Each variant's call times at `bytes` (those whose names contain `only`, when given).
Times TimeVariants(const std::vector<Variant>& variants, Buffers& b, int64_t bytes, int reps, const char* only) {
  Times times;
  std::mt19937 order_gen(static_cast<uint32_t>(bytes));  // the same order on every rank
  std::vector<size_t> order(variants.size());
  // Up to 1 MiB a variant runs `block` calls in a row each round, as a training loop repeats
  // one call: calls of different variants back to back disturb each other (caches, the
  // sockets' state), and more so the shorter they are.
  const int block = bytes <= (int64_t{1} << 20) ? 10 : 1;
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (int rep = 0; rep < reps + 2; ++rep) {
    std::shuffle(order.begin(), order.end(), order_gen);
    for (size_t v : order) {
      const auto& [name, keeps_input, run] = variants[v];
      if (only != nullptr && name.find(only) == std::string::npos) continue;
      for (int call = 0; call < block; ++call) {
        if (name == "kiln all_reduce, consuming") b.fresh = Tensor<Cpu>::full({b.n}, 1.0f, DType::kF32, CpuDevice(0));
        const auto start = Clock::now();
        run();
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        if (rep >= 2) times[name].push_back(s);  // two warm-up rounds
      }
    }
  }
  return times;
}

// The raw Gloo variant with the lowest median; with `keeping`, among those that keep their input.
std::string BestRaw(const std::vector<Variant>& variants, Times& times, bool keeping) {
  std::string best;
  for (const Variant& v : variants) {
    if (v.name.rfind("gloo", 0) != 0 || !times.count(v.name) || (keeping && !v.keeps_input)) continue;
    if (best.empty() || Median(times[v.name]) < Median(times[best])) best = v.name;
  }
  return best;
}

// Every rank's times differ a little; rank 0's are reported (the ops end together). Each
// kiln call is compared with the fastest raw variant of the same kind: one that keeps its
// input for the call that keeps it, any (in place or not) for the consuming call.
void PrintSize(int64_t bytes, const std::vector<Variant>& variants, Times& times) {
  const std::string size = SizeName(bytes);
  for (const Variant& v : variants) {
    if (!times.count(v.name)) continue;
    const double m = Median(times[v.name]);
    const std::string reference = v.name.rfind("kiln", 0) == 0 ? BestRaw(variants, times, v.keeps_input) : "";
    std::printf("%-10s %-30s %10.3f %8.3f %8.3f %8.2f", size.c_str(), v.name.c_str(), m * 1e3,
                Quantile(times[v.name], 0.1) * 1e3, Quantile(times[v.name], 0.9) * 1e3, bytes / m * 1e-9);
    if (!reference.empty()) std::printf("  %.2f of %s", Median(times[reference]) / m, reference.c_str());
    if (const std::string best = BestRaw(variants, times, false); !reference.empty() && best != reference) {
      std::printf(" (%.2f of the best of any kind, %s)", Median(times[best]) / m, best.c_str());
    }
    std::printf("\n");
  }
  std::fflush(stdout);
}

// The in-process group for contrast: two devices, one thread each; false when a call failed.
bool TimeInProcess(int reps) {
  DeviceGroup<Cpu> local({CpuDevice(0), CpuDevice(1)});
  MemberThreads threads(2);
  for (int64_t bytes : {int64_t{4} << 10, int64_t{1} << 20, int64_t{25} << 20, int64_t{64} << 20}) {
    std::vector<Tensor<Cpu>> in;
    for (int r = 0; r < 2; ++r) in.push_back(Tensor<Cpu>::full({bytes / 4}, 1.0f, DType::kF32, CpuDevice(r)));
    std::vector<double> t;
    for (int rep = 0; rep < reps + 2; ++rep) {
      const auto start = Clock::now();
      const absl::Status s = threads.Run([&](int r) { return local.AllReduce(r, in[r], ReduceOp::kSum).status(); });
      if (!s.ok()) return false;
      if (rep >= 2) t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    std::printf("%-10s %-30s %10.3f %8s %8s %8.2f\n", SizeName(bytes).c_str(), "kiln in-process cpu:0,cpu:1",
                Median(t) * 1e3, "", "", bytes / Median(t) * 1e-9);
  }
  return true;
}

// kiln's process group and raw Gloo's own connections; null, the error printed, on failure.
std::shared_ptr<GlooProcessGroup> Connect(const LaunchEnv& env, const std::string& run_id_suffix) {
  ProcessGroupOptions options = ProcessGroupOptions::From(env, std::chrono::seconds(120));
  options.run_id += run_id_suffix;
  auto group = GlooProcessGroup::Connect(options);
  if (!group.ok()) {
    std::fprintf(stderr, "%s\n", std::string(group.status().message()).c_str());
    return nullptr;
  }
  return *std::move(group);
}

int Main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  auto env = ReadLaunchEnv();
  if (!env.ok() || !env->has_value()) {
    std::fprintf(stderr, "run me under tools/launch: %s\n",
                 env.ok() ? "no launch environment" : std::string(env.status().message()).c_str());
    return 2;
  }
  if (!cpu::Configure({.devices = 2, .threads_per_device = 1}).ok()) return 2;
  const std::shared_ptr<GlooProcessGroup> world = Connect(**env, "");
  if (world == nullptr) return 1;
  // Raw Gloo gets connections of its own: its registered-buffer classes size a socket's send
  // buffer for their messages, which would change kiln's sockets too if they were shared.
  const std::shared_ptr<GlooProcessGroup> raw = Connect(**env, "-raw");
  if (raw == nullptr) return 1;
  const auto& context = raw->context();
  const bool lead = world->rank() == 0;
  DeviceGroup<Cpu> group({CpuDevice(0)}, {.process_group = world});
  if (lead) {
    std::printf("%-10s %-30s %10s %8s %8s %8s  %s\n", "size", "variant", "median ms", "p10 ms", "p90 ms", "GB/s",
                "vs the best raw Gloo variant of its kind (median / median)");
  }
  std::vector<int64_t> sizes = SizesFromEnv();
  const char* only = std::getenv("VARIANT");  // times only the variants whose names contain this
  if (sizes.empty()) sizes = {int64_t{4} << 10, int64_t{1} << 20, int64_t{25} << 20, int64_t{64} << 20};
  for (int64_t bytes : sizes) {
    Buffers buffers(context, bytes / 4);
    const std::vector<Variant> variants = Variants(context, buffers, group, *world);
    Times times = TimeVariants(variants, buffers, bytes, reps, only);
    if (lead) PrintSize(bytes, variants, times);
  }
  // The in-process group for contrast: rank 0 alone; the other ranks wait for it at a last
  // collective.
  if (lead && (only == nullptr || std::string("kiln in-process").find(only) != std::string::npos)) {
    if (!TimeInProcess(reps)) return 1;
  }
  const Tensor<Cpu> done = Tensor<Cpu>::full({1}, 1.0f, DType::kF32, CpuDevice(0));
  return group.AllReduce(0, done, ReduceOp::kSum).ok() ? 0 : 1;
}

}  // namespace
}  // namespace kiln::distributed

int main(int argc, char** argv) { return kiln::distributed::Main(argc, argv); }
