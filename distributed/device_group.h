// DeviceGroup<B>: a fixed set of devices of one backend that run collectives together:
// all-reduce (sum, mean, max, min), broadcast, all-gather and reduce-scatter (both along
// dim 0). Two ways in: a per-device call, made by each member's own thread with its rank,
// which meets the others at a rendezvous with a deadline; and a list call with one tensor per
// member. Every member reduces its own chunk (no single thread does all the work), in member
// order, so results are bit-identical on every member and every run.
#ifndef KILN_DISTRIBUTED_DEVICE_GROUP_H_
#define KILN_DISTRIBUTED_DEVICE_GROUP_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "distributed/collective_kernels.h"
#ifdef KILN_WITH_VULKAN
#include "distributed/vulkan_collectives.h"
#endif
#include "distributed/rendezvous.h"
#include "tensor/tensor.h"

namespace kiln::distributed {

struct GroupOptions {
  // How long a member waits for the others at each meeting before the group gives up.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

// Runs call(rank) for every member of a group of `size` on a thread of its own (rank 0 on
// this one): the results in rank order, or the first error.
template <class T, class F>
absl::StatusOr<std::vector<T>> OnEveryMember(int size, size_t given, F call) {
  if (static_cast<int>(given) != size) {
    return absl::InvalidArgumentError(absl::StrCat("a list call needs one tensor per member: got ",
                                                   given, " for a group of ", size));
  }
  std::vector<absl::StatusOr<T>> results(size, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 1; r < size; ++r) threads.emplace_back([&, r] { results[r] = call(r); });
  results[0] = call(0);
  for (auto& t : threads) t.join();
  std::vector<T> out;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

template <Backend B>
class DeviceGroup {
 public:
  using Device = typename B::Device;
  using P = typename B::Primitive;
  using K = CollectiveKernels<B>;
  using Staged = typename K::Staged;

  DeviceGroup(std::vector<Device> devices, GroupOptions options = {})
      : devices_(std::move(devices)), rendezvous_(static_cast<int>(devices_.size()), options.timeout),
        slots_(devices_.size()) {}
  DeviceGroup(const DeviceGroup&) = delete;
  DeviceGroup& operator=(const DeviceGroup&) = delete;

  int size() const { return static_cast<int>(devices_.size()); }
  const std::vector<Device>& devices() const { return devices_; }

  // ---- Per-device calls ---------------------------------------------------------------------
  absl::StatusOr<Tensor<B>> AllReduce(int rank, const Tensor<B>& t, ReduceKind kind,
                                      absl::string_view tag = "") {
    const std::string sig = absl::StrCat("all_reduce(", ReduceKindName(kind), ")", Describe(t, tag));
    absl::Status s = Enter(rank, t, sig);
    if (!s.ok()) return s;
    rendezvous_.Once([&] { shared_ = K::Allocate(t.shape(), t.dtype(), devices_[0]); });
    const int64_t n = t.numel();
    K::Reduce(kind, t.dtype(), Inputs(), K::MutableData(shared_), n * rank / size(),
              n * (rank + 1) / size(), devices_[rank]);
    return LeaveShared(rank);
  }

  // The root's tensor on every member.
  absl::StatusOr<Tensor<B>> Broadcast(int rank, const Tensor<B>& t, int root,
                                      absl::string_view tag = "") {
    if (root < 0 || root >= size()) {
      return absl::InvalidArgumentError(absl::StrCat("broadcast: root ", root, " is not a member of a group of ", size()));
    }
    absl::Status s = Enter(rank, t, absl::StrCat("broadcast(root ", root, ")", Describe(t, tag)));
    if (!s.ok()) return s;
    return Leave(rank, slots_[root]);
  }

  // Every member's tensor, concatenated along dim 0 in member order.
  absl::StatusOr<Tensor<B>> AllGather(int rank, const Tensor<B>& t, absl::string_view tag = "") {
    if (t.rank() == 0) return absl::InvalidArgumentError("all_gather: needs a tensor of rank >= 1");
    absl::Status s = Enter(rank, t, absl::StrCat("all_gather", Describe(t, tag)));
    if (!s.ok()) return s;
    rendezvous_.Once([&] {
      Dims dims(t.shape().dims().begin(), t.shape().dims().end());
      dims[0] *= size();
      shared_ = K::Allocate(Shape(dims), t.dtype(), devices_[0]);
    });
    const int64_t n = t.numel();
    K::CopyInto(t.dtype(), K::Data(slots_[rank]), K::MutableData(shared_), rank * n, n);
    return LeaveShared(rank);
  }

  // Member r gets the reduction over all members of rows [r*d/N, (r+1)*d/N) of dim 0.
  absl::StatusOr<Tensor<B>> ReduceScatter(int rank, const Tensor<B>& t, ReduceKind kind,
                                          absl::string_view tag = "") {
    if (t.rank() == 0 || t.size(0) % size() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reduce_scatter: dim 0 of ", t.Describe(), " must divide into ", size(), " equal parts"));
    }
    absl::Status s = Enter(rank, t, absl::StrCat("reduce_scatter(", ReduceKindName(kind), ")", Describe(t, tag)));
    if (!s.ok()) return s;
    Dims dims(t.shape().dims().begin(), t.shape().dims().end());
    dims[0] /= size();
    const Staged out = K::Allocate(Shape(dims), t.dtype(), devices_[rank]);
    const int64_t part = t.numel() / size();
    const int64_t bytes = part * DTypeSize(t.dtype());
    std::vector<const void*> inputs;
    for (const void* p : Inputs()) inputs.push_back(static_cast<const std::byte*>(p) + rank * bytes);
    K::Reduce(kind, t.dtype(), inputs, K::MutableData(out), 0, part, devices_[rank]);
    return Leave(rank, out);
  }

  // ---- List calls: tensors[i] lives on member i --------------------------------------------
  absl::StatusOr<std::vector<Tensor<B>>> AllReduce(absl::Span<const Tensor<B>> tensors, ReduceKind kind) {
    return OnEveryMember<Tensor<B>>(size(), tensors.size(), [&](int r) { return AllReduce(r, tensors[r], kind); });
  }
  absl::StatusOr<std::vector<Tensor<B>>> Broadcast(absl::Span<const Tensor<B>> tensors, int root) {
    return OnEveryMember<Tensor<B>>(size(), tensors.size(), [&](int r) { return Broadcast(r, tensors[r], root); });
  }
  absl::StatusOr<std::vector<Tensor<B>>> AllGather(absl::Span<const Tensor<B>> tensors) {
    return OnEveryMember<Tensor<B>>(size(), tensors.size(), [&](int r) { return AllGather(r, tensors[r]); });
  }
  absl::StatusOr<std::vector<Tensor<B>>> ReduceScatter(absl::Span<const Tensor<B>> tensors, ReduceKind kind) {
    return OnEveryMember<Tensor<B>>(size(), tensors.size(), [&](int r) { return ReduceScatter(r, tensors[r], kind); });
  }

 private:
  static std::string Describe(const Tensor<B>& t, absl::string_view tag) {
    return absl::StrCat(tag.empty() ? "" : absl::StrCat(" '", tag, "'"), " of ", DTypeName(t.dtype()),
                        t.shape().ToString());
  }

  // Checks the member, publishes its dense input and meets the others.
  absl::Status Enter(int rank, const Tensor<B>& t, const std::string& signature) {
    if (rank < 0 || rank >= size()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not a member of a group of ", size()));
    }
    if (!(t.device() == devices_[rank])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "member ", rank, " is ", devices_[rank].ToString(), " but its tensor ", t.Describe(),
          " is not; move it with .to(device)"));
    }
    slots_[rank] = K::Stage(t.primitive());
    return rendezvous_.Arrive(rank, signature);
  }

  std::vector<const void*> Inputs() const {
    std::vector<const void*> out;
    for (const Staged& p : slots_) out.push_back(K::Data(p));
    return out;
  }

  // Leave with the round's shared output, which every member wrote a part of.
  absl::StatusOr<Tensor<B>> LeaveShared(int rank) {
    if constexpr (K::kUnstageCopies) {
      if (absl::Status s = rendezvous_.Settle(rank); !s.ok()) return s;
    }
    return Leave(rank, shared_);
  }

  // Waits until every member is done reading the others' inputs, then releases this one's.
  absl::StatusOr<Tensor<B>> Leave(int rank, const Staged& result) {
    const P mine = K::Unstage(result, devices_[rank]);
    absl::Status s = rendezvous_.Depart(rank);
    if (!s.ok()) return s;
    return Tensor<B>(mine);
  }

  const std::vector<Device> devices_;
  Rendezvous rendezvous_;
  std::vector<Staged> slots_;  // member r's staged input for the current round
  Staged shared_;              // the output of the current round, when members share one
};

}  // namespace kiln::distributed

// Backends whose groups are not the generic one (NCCL for CUDA) specialise DeviceGroup here,
// before any use can instantiate the primary template for them.
#ifdef KILN_WITH_CUDA
#include "distributed/cuda_group.h"
#endif

#endif  // KILN_DISTRIBUTED_DEVICE_GROUP_H_
