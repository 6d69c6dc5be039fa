// One rank of a multi-process test: reads its place from the environment (KILN_*), joins the
// Gloo process group and runs one scenario, printing "OK ..." lines for checks that held and
// "STATUS <code>: <message>" for a collective's error. Exit status: 0 all checks held, 1 a
// check failed, 2 the process group could not be made, 3 a collective failed (as expected in
// the fault scenarios; the test reads the status line).
//
//   process_group_worker <scenario> [local devices] [timeout ms] [iterations]
//   scenarios: collectives, large, autodiff, data_parallel, data_parallel_bf16, mismatch_shape,
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

namespace kiln::distributed {
namespace {

using T = Tensor<Cpu>;
using ADB = Autodiff<Cpu>;
using AD = Tensor<ADB>;

int failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "OK" : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++failures;
}

int Status(const absl::Status& s) {
  std::printf("STATUS %s: %s\n", absl::StatusCodeToString(s.code()).c_str(), std::string(s.message()).c_str());
  std::fflush(stdout);
  return 3;
}

template <Backend B>
std::vector<double> V(const Tensor<B>& t) {
  return t.to_data().ToDoubles();
}

// Global member g's input: small multiples of 1/4, so sums are exact in any order.
template <Backend B>
Tensor<B> Input(int g, Shape shape, DType dtype, const typename B::Device& d) {
  std::vector<double> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = (g + 1) * (IsFloating(dtype) ? 0.25 : 1) + static_cast<double>(i % 7) - 3 * g;
  return Tensor<B>::from_vector(v, shape, d).to(dtype);
}

template <Backend B>
struct Setup {
  std::shared_ptr<GlooProcessGroup> world;
  std::vector<typename B::Device> devices;
  int local = 1;
};

// All-reduces past the process group's small-payload cutoff (odd counts, several segments per
// rank), with the input kept and consumed, against exact values; a kept input stays untouched.
template <Backend B>
int Large(const Setup<B>& s) {
  using T = Tensor<B>;
  DeviceGroup<B> group(s.devices, {.process_group = s.world});
  const int G = group.global_size(), L = group.size();
  // Just past the cutoff: every dtype and kind; with several segments per rank: a few.
  struct Case {
    int64_t n;
    DType dtype;
    ReduceOp kind;
  };
  std::vector<Case> cases;
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kI64}) {
    for (ReduceOp kind : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
      if (kind != ReduceOp::kMean || dtype == DType::kF32 || dtype == DType::kF64)
        cases.push_back({65537, dtype, kind});
    }
  }
  const int64_t big = (5 << 18) + 3;
  for (Case c : {Case{big, DType::kF32, ReduceOp::kSum}, Case{big, DType::kF64, ReduceOp::kMean},
                 Case{big, DType::kI32, ReduceOp::kMax}, Case{big, DType::kF32, ReduceOp::kMin}}) {
    cases.push_back(c);
  }
  for (const auto& [n, dtype, kind] : cases) {
    const Shape shape({n});
    std::vector<std::vector<double>> inputs;
    for (int g = 0; g < G; ++g) inputs.push_back(V(Input<B>(g, shape, dtype, s.devices[0])));
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i) {
      double acc = inputs[0][i];
      for (int g = 1; g < G; ++g) {
        const double x = inputs[g][i];
        acc = kind == ReduceOp::kMax ? std::max(acc, x) : kind == ReduceOp::kMin ? std::min(acc, x) : acc + x;
      }
      want[i] = kind != ReduceOp::kMean ? acc
                : dtype == DType::kF32  ? static_cast<float>(acc) / static_cast<float>(G)
                                        : acc / G;
    }
    std::vector<T> in;
    for (int r = 0; r < L; ++r) in.push_back(Input<B>(group.global_rank(r), shape, dtype, s.devices[r]));
    auto kept = group.AllReduce(in, kind);
    if (!kept.ok()) return Status(kept.status());
    bool same = V(in[0]) == inputs[group.global_rank(0)];
    for (int r = 0; r < L; ++r) same = same && V((*kept)[r]) == want;
    if (L == 1) {
      auto consumed = group.AllReduce(0, std::move(in[0]), kind);
      if (!consumed.ok()) return Status(consumed.status());
      same = same && V(*consumed) == want;
    }
    Check(same, absl::StrCat("all_reduce(", OpName(kind), ") of ", DTypeName(dtype), "[", n, "]"));
    // Reduce-scatter of the same kind, on the first m elements (a count the world divides):
    // member g gets its part of the all-reduce's result, the input stays untouched.
    if (kind == ReduceOp::kMean) continue;
    const int64_t m = n / G * G;
    std::vector<T> head;
    for (int r = 0; r < L; ++r) head.push_back(Input<B>(group.global_rank(r), Shape({m}), dtype, s.devices[r]));
    auto scattered = group.ReduceScatter(head, kind);
    if (!scattered.ok()) return Status(scattered.status());
    same = V(head[0]) ==
           std::vector<double>(inputs[group.global_rank(0)].begin(), inputs[group.global_rank(0)].begin() + m);
    for (int r = 0; r < L; ++r) {
      const int g = group.global_rank(r);
      same =
          same && V((*scattered)[r]) == std::vector<double>(want.begin() + m / G * g, want.begin() + m / G * (g + 1));
    }
    Check(same, absl::StrCat("reduce_scatter(", OpName(kind), ") of ", DTypeName(dtype), "[", m, "]"));
  }
  return failures ? 1 : 0;
}

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

template <Backend B>
int Collectives(const Setup<B>& s) {
  using T = Tensor<B>;
  DeviceGroup<B> group(s.devices, {.process_group = s.world});
  const int G = group.global_size(), L = group.size();
  const Shape shape({2 * G, 3});
  // bf16 and f16 too (gradients all-reduced in bf16): the inputs and their sums are exact in
  // both, and a mean is the f32 sum divided once, then rounded to the half type.
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBF16, DType::kF16}) {
    for (ReduceOp kind : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
      if (dtype != DType::kF32 && !IsHalf(dtype) && (kind == ReduceOp::kMax || kind == ReduceOp::kMin)) continue;
      std::vector<T> in;
      for (int r = 0; r < L; ++r) in.push_back(Input<B>(group.global_rank(r), shape, dtype, s.devices[r]));
      auto out = group.AllReduce(in, kind);
      if (!out.ok()) return Status(out.status());
      std::vector<double> want(shape.numel());
      for (size_t i = 0; i < want.size(); ++i) {
        double acc = kind == ReduceOp::kMax ? -1e300 : kind == ReduceOp::kMin ? 1e300 : 0;
        for (int g = 0; g < G; ++g) {
          const double x = V(Input<B>(g, shape, dtype, s.devices[0]))[i];
          acc = kind == ReduceOp::kMax ? std::max(acc, x) : kind == ReduceOp::kMin ? std::min(acc, x) : acc + x;
        }
        if (kind == ReduceOp::kMean) {
          const float f32_mean = static_cast<float>(acc) / static_cast<float>(G);
          acc = dtype == DType::kF32    ? f32_mean
                : dtype == DType::kBF16 ? static_cast<float>(BFloat16(f32_mean))
                : dtype == DType::kF16  ? static_cast<float>(Float16(f32_mean))
                : dtype == DType::kF64  ? acc / G
                                        : std::trunc(acc / G);
        }
        want[i] = acc;
      }
      bool same = true;
      for (int r = 0; r < L; ++r) same = same && V((*out)[r]) == want && (*out)[r].device() == s.devices[r];
      Check(same, absl::StrCat("all_reduce(", OpName(kind), ") ", DTypeName(dtype)));
    }
  }
  std::vector<T> in;
  for (int r = 0; r < L; ++r) in.push_back(Input<B>(group.global_rank(r), shape, DType::kF32, s.devices[r]));
  for (int root = 0; root < G; ++root) {
    auto out = group.Broadcast(in, root);
    if (!out.ok()) return Status(out.status());
    bool same = true;
    for (int r = 0; r < L; ++r) same = same && V((*out)[r]) == V(Input<B>(root, shape, DType::kF32, s.devices[0]));
    Check(same, absl::StrCat("broadcast root ", root));
  }
  auto gathered = group.AllGather(in);
  if (!gathered.ok()) return Status(gathered.status());
  std::vector<T> parts;
  for (int g = 0; g < G; ++g) parts.push_back(Input<B>(g, shape, DType::kF32, s.devices[0]));
  const std::vector<double> all = V(T::cat(parts, 0));
  bool same = true;
  for (int r = 0; r < L; ++r)
    same = same && V((*gathered)[r]) == all && (*gathered)[r].shape() == Shape({2 * G * G, 3});
  Check(same, "all_gather");
  for (ReduceOp kind : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
    auto scattered = group.ReduceScatter(in, kind);
    if (!scattered.ok()) return Status(scattered.status());
    auto reduced = group.AllReduce(in, kind);
    if (!reduced.ok()) return Status(reduced.status());
    same = true;
    for (int r = 0; r < L; ++r) {
      const int g = group.global_rank(r);
      same = same && V((*scattered)[r]) == V((*reduced)[0].slice(0, 2 * g, 2 * g + 2));
    }
    Check(same, absl::StrCat("reduce_scatter(", OpName(kind), ") = its part of all_reduce"));
  }
  if (L == 1) {
    // A consumed input may hold the result; one that something else still refers to does not.
    const T original = Input<B>(group.global_rank(0), shape, DType::kF32, s.devices[0]);
    const std::vector<double> before = V(original);
    T x = original;
    auto kept = group.AllReduce(0, std::move(x), ReduceOp::kSum);
    auto want = group.AllReduce(0, original, ReduceOp::kSum);
    T y = Input<B>(group.global_rank(0), shape, DType::kF32, s.devices[0]) * 1;
    auto consumed = group.AllReduce(0, std::move(y), ReduceOp::kSum);
    if (!kept.ok()) return Status(kept.status());
    if (!want.ok()) return Status(want.status());
    if (!consumed.ok()) return Status(consumed.status());
    Check(V(original) == before && V(*kept) == V(*want) && V(*consumed) == V(*want),
          "a consumed all_reduce input: same result, a shared input left untouched");
  }
  // Fewer elements than ranks (a loss, a count): some ranks own an empty part.
  for (int64_t n : {1, 2}) {
    std::vector<T> tiny;
    for (int r = 0; r < L; ++r) tiny.push_back(T::full({n}, group.global_rank(r) + 1, DType::kF32, s.devices[r]));
    auto out = group.AllReduce(tiny, ReduceOp::kSum);
    if (!out.ok()) return Status(out.status());
    same = true;
    for (int r = 0; r < L; ++r) same = same && V((*out)[r]) == std::vector<double>(n, G * (G + 1) / 2.0);
    Check(same, absl::StrCat("all_reduce of f32[", n, "]"));
  }
  // Errors the caller makes are caught before anything moves, the same on every rank.
  auto bad_root = group.Broadcast(in, G);
  Check(bad_root.status().message() == absl::StrCat("broadcast: root ", G, " is not a member of a group of ", G),
        absl::StrCat("broadcast root out of range: ", bad_root.status().message()));
  return failures ? 1 : 0;
}

// all_reduce's backward is an all_reduce over the world: d/dx_g sum(all_reduce(x) * w_g) = sum_g w_g.
template <Backend B>
int AutodiffScenario(const Setup<B>& s) {
  using AD = Tensor<Autodiff<B>>;
  DeviceGroup<Autodiff<B>> group(s.devices, {.process_group = s.world});
  const int G = group.global_size();
  auto out =
      OnEveryMember<std::vector<double>>(group.size(), group.size(), [&](int r) -> absl::StatusOr<std::vector<double>> {
        const int g = group.global_rank(r);
        const AD x = AD::from_vector(std::vector<double>{1.0 * g, 2.0}, {2}, s.devices[r]).require_grad();
        auto y = group.AllReduce(r, x, ReduceOp::kSum);
        if (!y.ok()) return y.status();
        auto gathered = group.AllGather(r, x);
        if (!gathered.ok()) return gathered.status();
        const AD loss = (*y * static_cast<double>(g + 1)).sum() + gathered->sum();
        return loss.backward().get(x)->to_data().ToDoubles();
      });
  if (!out.ok()) return Status(out.status());
  const double want = G * (G + 1) / 2.0 + G;  // sum of weights, plus all_gather's reduce_scatter of ones
  for (const auto& grad : *out)
    Check(grad == std::vector<double>{want, want}, absl::StrCat("gradient ", grad[0], " = ", want));
  return failures ? 1 : 0;
}

std::unique_ptr<nn::Sequential<ADB>> Model(Generator& gen) {
  auto m = std::make_unique<nn::Sequential<ADB>>();
  m->add<nn::Linear<ADB>>(6, 16, gen).add<nn::ReLU<ADB>>().add<nn::Linear<ADB>>(16, 4, gen);
  return m;
}

// DataParallel over the world ends where DataParallel over the same number of devices in one
// process ends (this process computes that reference itself, on devices of its own), with
// gradients all-reduced in their own dtype or in `reduce_dtype` (bf16 compression).
int DataParallelScenario(const Setup<Cpu>& s, int steps, std::optional<DType> reduce_dtype) {
  const int G = s.local * s.world->world_size();
  Generator gen(3);
  auto model = Model(gen);
  const auto x = T::uniform({8 * G, 6}, -1, 1, gen);
  const auto y = T::uniform({8 * G}, 0, 4, gen).to(DType::kI64);
  auto sgd = [] { return std::make_unique<nn::Sgd<Cpu>>(0.1, nn::SgdOptions{.momentum = 0.9}); };
  auto loss = [](nn::Module<ADB>& m, const AD& a, const AD& b) { return nn::CrossEntropy(m(a), b); };
  auto world = DataParallel<Cpu>::Create(
      *model, std::make_shared<DeviceGroup<ADB>>(s.devices, GroupOptions{.process_group = s.world}), sgd,
      {.bucket_bytes = 256, .reduce_dtype = reduce_dtype});
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
  double worst = 0;
  auto p = (*world)->replica(0).named_parameters(), q = (*reference)->replica(0).named_parameters();
  for (size_t i = 0; i < p.size(); ++i) {
    const auto u = p[i].second->to_data().ToDoubles(), v = q[i].second->to_data().ToDoubles();
    for (size_t j = 0; j < u.size(); ++j) worst = std::max(worst, std::abs(u[j] - v[j]));
  }
  Check(worst <= tolerance, absl::StrCat("parameters differ by at most ", worst, " (tolerance ", tolerance, ")"));
  return failures ? 1 : 0;
}

template <Backend B>
int Mismatch(const Setup<B>& s, bool dtype) {
  using T = Tensor<B>;
  DeviceGroup<B> group(s.devices, {.process_group = s.world});
  const int rank = s.world->rank();
  std::vector<T> in;
  for (int r = 0; r < group.size(); ++r) {
    in.push_back(dtype ? T::ones({4}, rank == 1 ? DType::kF64 : DType::kF32, s.devices[r])
                       : T::ones({4 + (rank == 1 ? 1 : 0)}, DType::kF32, s.devices[r]));
  }
  auto out = group.AllReduce(in, ReduceOp::kSum);
  if (out.ok()) {
    Check(false, "mismatched all_reduce succeeded");
    return 1;
  }
  Status(out.status());
  // The group is still usable: the next matching call works.
  std::vector<T> ok_in;
  for (int r = 0; r < group.size(); ++r) ok_in.push_back(T::ones({2}, DType::kF32, s.devices[r]));
  auto next = group.AllReduce(ok_in, ReduceOp::kSum);
  Check(next.ok() && V((*next)[0]) == std::vector<double>(2, group.global_size()), "the next call works");
  if (!dtype) {
    // Agree alone (what CUDA groups use before NCCL moves data): the same verdict, and then the
    // group still works.
    Status(s.world->Agree(rank == 1 ? "step 2" : "step 1"));
    Check(s.world->Agree("step 3").ok(), "agreeing on one call works");
  }
  return failures ? 1 : 0;
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

// This process's `local` devices of backend B: its first ones (made if the backend can), or,
// where a device serves one process (a GPU), those after the lower local ranks' ones.
template <class B>
absl::StatusOr<std::vector<typename B::Device>> LocalDevices(int local_rank, int local) {
  if constexpr (B::kDeviceOwnsAProcess) {
    std::vector<typename B::Device> out;
    for (int r = 0; r < local; ++r) out.push_back(typename B::Device(local_rank * local + r));
    return out;
  } else {
    return B::EnsureDevices(local);
  }
}

// The scenarios every backend runs, on `local` devices of B.
template <class B>
int OnBackend(absl::string_view scenario, std::shared_ptr<GlooProcessGroup> world, int local_rank, int local) {
  auto devices = LocalDevices<B>(local_rank, local);
  if (!devices.ok()) {
    Status(devices.status());
    return 2;
  }
  const Setup<B> s{.world = std::move(world), .devices = *std::move(devices), .local = local};
  if (scenario == "collectives") return Collectives(s);
  if (scenario == "large") return Large(s);
  if (scenario == "autodiff") return AutodiffScenario(s);
  if (scenario == "mismatch_shape") return Mismatch(s, false);
  if (scenario == "mismatch_dtype") return Mismatch(s, true);
  std::printf("unknown scenario '%s_%s'\n", B::Name(), std::string(scenario).c_str());
  return 1;
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
}  // namespace kiln::distributed

int main(int argc, char** argv) { return kiln::distributed::Main(argc, argv); }
