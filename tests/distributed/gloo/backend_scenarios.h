// The scenarios every compiled-in backend runs across processes (process_group_test's
// BackendCollectives and BackendErrors): collectives against exact values, large all-reduces,
// the autodiff path and mismatched calls, on `local` devices of B.
#ifndef KILN_TESTS_DISTRIBUTED_GLOO_BACKEND_SCENARIOS_H_
#define KILN_TESTS_DISTRIBUTED_GLOO_BACKEND_SCENARIOS_H_

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "distributed/autodiff_group.h"
#include "distributed/gloo/gloo_process_group.h"
#include "tests/distributed/gloo/worker_report.h"

namespace kiln::distributed::worker {

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

}  // namespace kiln::distributed::worker

#endif  // KILN_TESTS_DISTRIBUTED_GLOO_BACKEND_SCENARIOS_H_
