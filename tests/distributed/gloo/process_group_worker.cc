// One rank of a multi-process test: reads its place from the environment (KILN_*), joins the
// Gloo process group and runs one scenario, printing "OK ..." lines for checks that held and
// "STATUS <code>: <message>" for a collective's error. Exit status: 0 all checks held, 1 a
// check failed, 2 the process group could not be made, 3 a collective failed (as expected in
// the fault scenarios; the test reads the status line).
//
//   process_group_worker <scenario> [local devices] [timeout ms] [iterations]
//   scenarios: collectives, large, autodiff, data_parallel, data_parallel_bf16,
//   data_parallel_optimizer, data_parallel_gradients, data_parallel_parameters, shard_disagree,
//   sharded_loop, zero3_loop, mismatch_shape,
//   mismatch_dtype, mismatch_large, repeated, loop, tagged_loop, join, on CPU devices;
//   <backend>_collectives, <backend>_large, <backend>_autodiff, <backend>_mismatch_shape,
//   <backend>_mismatch_dtype
//   on the devices of any compiled-in backend (backends/registry.h), e.g. vulkan_collectives:
//   its first devices, or, where a device serves one process (a GPU), the process with local
//   rank l takes devices l * devices, ... (CUDA's go through NCCL).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "backends/registry.h"
#include "distributed/autodiff_group.h"
#include "distributed/data_parallel.h"
#include "distributed/gloo/gloo_process_group.h"
#include "distributed/process/launch_env.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"
#include "tests/distributed/gloo/backend_scenarios.h"
#include "tests/distributed/gloo/worker_report.h"

namespace kiln::distributed::worker {
namespace {

using T = Tensor<Cpu>;
using ADB = Autodiff<Cpu>;
using AD = Tensor<ADB>;

// Calls that differ across ranks on the direct all-reduce's path, whose first segments leave
// before the ranks have compared their calls: every rank reports the mismatch, the segments
// sent early are dropped (a kept input stays untouched), and the next calls give exact results.
// Rank 1 differs; the others make the same call.
int MismatchLarge(const Setup<Cpu>& s) {
  DeviceGroup<Cpu> group(s.devices, {.process_group = s.world});
  const int rank = s.world->rank(), G = group.global_size();
  const int64_t n = (3 << 18) + 6;  // several segments; divisible by worlds of 2 and 3
  const T big = Input<Cpu>(rank, Shape({n}), DType::kF32, s.devices[0]);
  const std::vector<double> before = V(big);
  std::vector<double> want(n, 0.0);
  for (int g = 0; g < G; ++g) {
    const std::vector<double> x = V(Input<Cpu>(g, Shape({n}), DType::kF32, s.devices[0]));
    for (int64_t i = 0; i < n; ++i) want[i] += x[i];
  }
  auto exact = [&](const std::string& after) {
    auto out = group.AllReduce(0, big, ReduceOp::kSum);
    if (!out.ok()) Status(out.status());
    Check(out.ok() && V(big) == before && V(*out) == want, absl::StrCat("exact after ", after));
  };
  // 1: more elements on rank 1 (both send early, their segments of different sizes).
  auto r1 = rank == 1 ? group.AllReduce(0, T::full({n + 8}, 1.0f, DType::kF32, s.devices[0]), ReduceOp::kSum)
                      : group.AllReduce(0, big, ReduceOp::kSum);
  Status(r1.status());
  exact("a longer tensor");
  // 2: rank 1 only agrees on something else (sends nothing early); the others' input is kept.
  if (rank == 1) {
    Status(s.world->Agree("something else"));
  } else {
    Status(group.AllReduce(0, big, ReduceOp::kSum).status());
  }
  exact("an agreement");
  // 3: rank 1 reduce-scatters what the others all-reduce.
  Status(rank == 1 ? group.ReduceScatter(0, big, ReduceOp::kSum).status()
                   : group.AllReduce(0, big, ReduceOp::kSum).status());
  exact("a reduce-scatter");
  // 4: rank 1 all-reduces a small tensor (one segment, a few bytes) against a large one.
  Status(rank == 1 ? group.AllReduce(0, T::ones({3}, DType::kF32, s.devices[0]), ReduceOp::kSum).status()
                   : group.AllReduce(0, big, ReduceOp::kSum).status());
  exact("a small tensor");
  return failures ? 1 : 0;
}

std::unique_ptr<nn::Sequential<ADB>> Model(Generator& gen) {
  auto m = std::make_unique<nn::Sequential<ADB>>();
  m->add<nn::Linear<ADB>>(6, 16, gen).add<nn::ReLU<ADB>>().add<nn::Linear<ADB>>(16, 4, gen);
  return m;
}

// DataParallel over the world ends where DataParallel over the same number of devices in one
// process ends (this process computes that reference itself, on devices of its own, unsharded),
// with gradients all-reduced in their own dtype or in `reduce_dtype` (bf16 compression), and
// the world's run sharded as `sharding` says (which changes no bit).
int DataParallelScenario(const Setup<Cpu>& s, int steps, std::optional<DType> reduce_dtype,
                         Sharding sharding = Sharding::kNone) {
  const int G = s.local * s.world->world_size();
  Generator gen(3);
  auto model = Model(gen);
  const auto x = T::uniform({8 * G, 6}, -1, 1, gen);
  const auto y = T::uniform({8 * G}, 0, 4, gen).to(DType::kI64);
  auto sgd = [] { return std::make_unique<nn::Sgd<Cpu>>(0.1, nn::SgdOptions{.momentum = 0.9}); };
  auto loss = [](nn::Module<ADB>& m, const AD& a, const AD& b) { return nn::CrossEntropy(m(a), b); };
  auto world = DataParallel<Cpu>::Create(
      *model, std::make_shared<DeviceGroup<ADB>>(s.devices, GroupOptions{.process_group = s.world}), sgd,
      {.bucket_bytes = 256, .reduce_dtype = reduce_dtype, .sharding = sharding});
  if (!world.ok()) return Status(world.status());
  std::vector<CpuDevice> local;
  for (int r = 0; r < G; ++r) local.push_back(CpuDevice(s.local + r));
  auto reference = DataParallel<Cpu>::Create(*model, std::make_shared<DeviceGroup<ADB>>(local), sgd,
                                             {.bucket_bytes = 256, .reduce_dtype = reduce_dtype});
  if (!reference.ok()) return Status(reference.status());
  // Two processes of one device sum two gradients as one process does (a + b is
  // commutative): bit-identical. More members per process change the f32 summation order. In
  // bf16 the cross-process path rounds twice more than one process does (a local sum, then the
  // sum across processes, then a mean's division, each rounded to bf16, where one process
  // rounds the f32 mean once): a gradient may differ by 2u|g| (u = 2^-8, |g| <= 1 here), and
  // SGD (lr 0.1, momentum 0.9) carries that into a parameter by at most
  // lr * 2u * sum over steps t of (1 - 0.9^t) / 0.1.
  double tolerance = G == 2 ? 0 : 1e-5;
  if (reduce_dtype == DType::kBF16 && G > 2) {
    double carried = 0;
    for (int t = 1; t <= steps; ++t) carried += (1 - std::pow(0.9, t)) / 0.1;
    tolerance = 0.1 * 2 * std::ldexp(1.0, -8) * carried;
  }
  for (int step = 0; step < steps; ++step) {
    auto a = (*world)->Step(x, y, loss);
    if (!a.ok()) return Status(a.status());
    auto b = (*reference)->Step(x, y, loss);
    if (!b.ok()) return Status(b.status());
    Check(std::abs(*a - *b) <= std::max(1e-6, tolerance), absl::StrCat("step ", step, " loss ", *a, " vs ", *b));
  }
  if (absl::Status gathered = (*world)->GatherParameters(); !gathered.ok()) return Status(gathered);  // ZeRO-3
  double worst = 0;
  auto p = (*world)->replica(0).named_parameters(), q = (*reference)->replica(0).named_parameters();
  for (size_t i = 0; i < p.size(); ++i) {
    const auto u = p[i].second->to_data().ToDoubles(), v = q[i].second->to_data().ToDoubles();
    for (size_t j = 0; j < u.size(); ++j) worst = std::max(worst, std::abs(u[j] - v[j]));
  }
  Check(worst <= tolerance, absl::StrCat("parameters differ by at most ", worst, " (tolerance ", tolerance, ")"));
  return failures ? 1 : 0;
}

// Ranks that disagree on the stage: every rank's Create fails, naming the first that differs.
int ShardingDisagreement(const Setup<Cpu>& s) {
  Generator gen(3);
  auto model = Model(gen);
  auto sgd = [] { return std::make_unique<nn::Sgd<Cpu>>(0.1); };
  auto world = DataParallel<Cpu>::Create(
      *model, std::make_shared<DeviceGroup<ADB>>(s.devices, GroupOptions{.process_group = s.world}), sgd,
      {.sharding = s.world->rank() == 0 ? Sharding::kNone : Sharding::kGradients});
  if (!world.ok()) return Status(world.status());
  Check(false, "ranks that disagree on sharding made a DataParallel");
  return 1;
}

// ZeRO-2 steps in a loop (a reduce-scatter per bucket in backward, an all-gather per bucket
// after the update), or ZeRO-3's (an all-gather per layer before its forward and backward),
// printing every 20th; ends with the first failure's status.
int ShardedLoop(const Setup<Cpu>& s, int iterations, Sharding sharding) {
  const int G = s.local * s.world->world_size();
  Generator gen(3);
  auto model = Model(gen);
  const auto x = T::uniform({8 * G, 6}, -1, 1, gen);
  const auto y = T::uniform({8 * G}, 0, 4, gen).to(DType::kI64);
  auto sgd = [] { return std::make_unique<nn::Sgd<Cpu>>(0.01); };
  auto loss = [](nn::Module<ADB>& m, const AD& a, const AD& b) { return nn::CrossEntropy(m(a), b); };
  auto dp = DataParallel<Cpu>::Create(
      *model, std::make_shared<DeviceGroup<ADB>>(s.devices, GroupOptions{.process_group = s.world}), sgd,
      {.bucket_bytes = 256, .sharding = sharding});
  if (!dp.ok()) return Status(dp.status());
  for (int i = 0; iterations <= 0 || i < iterations; ++i) {
    auto step = (*dp)->Step(x, y, loss);
    if (!step.ok()) return Status(step.status());
    if (i % 20 == 0) {
      std::printf("ITERATION %d ok\n", i);
      std::fflush(stdout);
    }
  }
  return 0;
}

// A training loop's all-reduce, repeated: 40 calls of 1 MiB back to back, consuming their
// input as gradient sync does; prints the median time of a call.
int Repeated(const Setup<Cpu>& s) {
  DeviceGroup<Cpu> group(s.devices, {.process_group = s.world});
  std::vector<double> ms;
  for (int i = 0; i < 40; ++i) {
    T x = T::full({1 << 18}, 1.0f, DType::kF32, s.devices[0]);
    const auto start = std::chrono::steady_clock::now();
    auto out = group.AllReduce(0, std::move(x), ReduceOp::kSum);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (!out.ok()) return Status(out.status());
    if (V(*out)[777] != group.global_size()) Check(false, "repeated all_reduce sum");
  }
  std::sort(ms.begin(), ms.end());
  std::printf("MEDIAN_MS %.3f\n", ms[ms.size() / 2]);
  return failures ? 1 : 0;
}

// The same call string for different operations, as a caller of the process group itself may
// pass: every rank reports both operations, the input is untouched, and the group goes on.
int SameString(const Setup<Cpu>& s) {
  ProcessGroup& w = *s.world;
  const bool one = w.rank() == 1;
  std::vector<float> a(1000, 1.0f);
  auto then = [&](const absl::Status& st, const std::string& after) {
    Status(st);
    Check(std::all_of(a.begin(), a.end(), [](float v) { return v == 1.0f; }), absl::StrCat("untouched by ", after));
    std::vector<float> x(4096, 1.0f);
    const absl::Status next = w.AllReduce("next", x.data(), x.data(), 4096, DType::kF32, ReduceOp::kSum);
    Check(next.ok() && x[17] == w.world_size(), absl::StrCat("exact after ", after));
  };
  then(w.AllReduce("step", a.data(), a.data(), one ? 999 : 1000, DType::kF32, ReduceOp::kSum), "counts");
  then(one ? w.ReduceScatter("step", a.data(), 1000, DType::kF32, ReduceOp::kSum)
           : w.AllReduce("step", a.data(), a.data(), 1000, DType::kF32, ReduceOp::kSum),
       "kinds");
  then(one ? w.Agree("step") : w.AllReduce("step", a.data(), a.data(), 1000, DType::kF32, ReduceOp::kSum),
       "an agreement");
  return failures ? 1 : 0;
}

// A large broadcast and all-gather as the group's first calls (Gloo's algorithms, on unbound
// buffers, before any all-reduce has sent a segment): their times.
int BroadcastFirst(const Setup<Cpu>& s) {
  ProcessGroup& w = *s.world;
  constexpr int64_t kBytes = int64_t{16} << 20;
  std::vector<char> data(kBytes, w.rank() == 0 ? 7 : 0);
  auto start = std::chrono::steady_clock::now();
  Check(w.Broadcast("first", data.data(), kBytes, 0).ok() && data[12345] == 7, "broadcast");
  std::printf("BROADCAST_MS %.3f\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  std::vector<char> all(w.world_size() * (kBytes / 2), 0);
  std::fill_n(all.data() + w.rank() * (kBytes / 2), kBytes / 2, static_cast<char>(w.rank() + 1));
  start = std::chrono::steady_clock::now();
  Check(w.AllGather("second", all.data(), kBytes / 2).ok() && all[kBytes / 2 + 9] == 2, "all_gather");
  std::printf("ALLGATHER_MS %.3f\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return failures ? 1 : 0;
}

// All-reduces until told to stop (iterations) or a collective fails; prints the time from the
// last success to the failure. With LINGER_MS set, a failed rank then stays alive that long,
// holding its group, so a test sees what the group itself did with its connections.
int Loop(const Setup<Cpu>& s, int iterations) {
  DeviceGroup<Cpu> group(s.devices, {.process_group = s.world});
  std::vector<T> in;
  for (int r = 0; r < group.size(); ++r)
    in.push_back(T::full({1 << 16}, group.global_rank(r) + 1, DType::kF32, s.devices[r]));
  const double want = group.global_size() * (group.global_size() + 1) / 2.0;
  auto last = std::chrono::steady_clock::now();
  for (int i = 0; iterations <= 0 || i < iterations; ++i) {
    auto out = group.AllReduce(in, ReduceOp::kSum);
    const auto now = std::chrono::steady_clock::now();
    if (!out.ok()) {
      std::printf("FAILED after %.3f s\n", std::chrono::duration<double>(now - last).count());
      const int code = Status(out.status());
      if (const char* linger = std::getenv("LINGER_MS")) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(linger)));
      }
      return code;
    }
    if (V((*out)[0])[12345] != want) {
      Check(false, absl::StrCat("iteration ", i, " sum ", V((*out)[0])[12345], " != ", want));
      return 1;
    }
    last = now;
    if (i % 50 == 0) {
      std::printf("ITERATION %d ok\n", i);
      std::fflush(stdout);
    }
  }
  Check(true, "all iterations");
  return 0;
}

// Per-member all-reduces tagged 'step i', as a training loop's: until told to stop
// (iterations), a collective fails, or, with SKIP set, rank 1 skips step SKIP (and calls the
// next) to show what the flight recorder says about a rank out of step.
int TaggedLoop(const Setup<Cpu>& s, int iterations) {
  DeviceGroup<Cpu> group(s.devices, {.process_group = s.world});
  const int skip = std::getenv("SKIP") ? std::atoi(std::getenv("SKIP")) : -1;
  for (int i = 0; iterations <= 0 || i < iterations; ++i) {
    if (i == skip && s.world->rank() == 1) continue;
    auto out =
        group.AllReduce(0, T::full({4}, 1.0f, DType::kF32, s.devices[0]), ReduceOp::kSum, absl::StrCat("step ", i));
    if (!out.ok()) return Status(out.status());
    if (i % 50 == 0) {
      std::printf("ITERATION %d ok\n", i);
      std::fflush(stdout);
    }
  }
  Check(true, "all iterations");
  return 0;
}

int Main(int argc, char** argv) {
  absl::string_view scenario = argc > 1 ? argv[1] : "";
  const int local = argc > 2 ? std::atoi(argv[2]) : 1;
  const auto timeout = std::chrono::milliseconds(argc > 3 ? std::atoi(argv[3]) : 20000);
  const int iterations = argc > 4 ? std::atoi(argv[4]) : 0;
  auto env = ReadLaunchEnv();
  if (!env.ok() || !env->has_value()) {
    std::printf("STATUS %s\n", env.ok() ? "no launch environment" : std::string(env.status().message()).c_str());
    return 2;
  }
  const int world_size = (*env)->world_size;
  if (!cpu::Configure({.devices = local * (1 + (absl::StartsWith(scenario, "data_parallel") ? world_size : 0)),
                       .threads_per_device = 1})
           .ok()) {
    return 2;
  }
  auto world = GlooProcessGroup::Connect(ProcessGroupOptions::From(**env, timeout));
  if (!world.ok()) {
    Status(world.status());
    return 2;
  }
  std::printf("JOINED rank %d of %d\n", (*world)->rank(), (*world)->world_size());
  std::fflush(stdout);
  std::optional<int> on_backend;
  CompiledBackends::AnyOf([&]<class B>() {
    if (!absl::StartsWith(scenario, absl::StrCat(B::Name(), "_"))) return false;
    on_backend =
        OnBackend<B>(scenario.substr(std::string_view(B::Name()).size() + 1), *world, (*env)->local_rank, local);
    return true;
  });
  if (on_backend) return *on_backend;
  Setup<Cpu> s{.world = *world, .local = local};
  for (int r = 0; r < local; ++r) s.devices.push_back(CpuDevice(r));
  if (scenario == "collectives") return Collectives(s);
  if (scenario == "large") return Large(s);
  if (scenario == "autodiff") return AutodiffScenario(s);
  if (scenario == "data_parallel") return DataParallelScenario(s, iterations > 0 ? iterations : 5, std::nullopt);
  if (scenario == "data_parallel_bf16") return DataParallelScenario(s, iterations > 0 ? iterations : 5, DType::kBF16);
  if (scenario == "data_parallel_optimizer") {
    return DataParallelScenario(s, iterations > 0 ? iterations : 5, std::nullopt, Sharding::kOptimizer);
  }
  if (scenario == "data_parallel_gradients") {
    return DataParallelScenario(s, iterations > 0 ? iterations : 5, std::nullopt, Sharding::kGradients);
  }
  if (scenario == "shard_disagree") return ShardingDisagreement(s);
  if (scenario == "data_parallel_parameters") {
    return DataParallelScenario(s, iterations > 0 ? iterations : 5, std::nullopt, Sharding::kParameters);
  }
  if (scenario == "sharded_loop") return ShardedLoop(s, iterations, Sharding::kGradients);
  if (scenario == "zero3_loop") return ShardedLoop(s, iterations, Sharding::kParameters);
  if (scenario == "mismatch_shape") return Mismatch(s, false);
  if (scenario == "mismatch_dtype") return Mismatch(s, true);
  if (scenario == "mismatch_large") return MismatchLarge(s);
  if (scenario == "repeated") return Repeated(s);
  if (scenario == "same_string") return SameString(s);
  if (scenario == "broadcast_first") return BroadcastFirst(s);
  if (scenario == "loop") return Loop(s, iterations);
  if (scenario == "tagged_loop") return TaggedLoop(s, iterations);
  if (scenario == "join") return 0;
  std::printf("unknown scenario '%s'\n", std::string(scenario).c_str());
  return 1;
}

}  // namespace
}  // namespace kiln::distributed::worker

int main(int argc, char** argv) { return kiln::distributed::worker::Main(argc, argv); }
