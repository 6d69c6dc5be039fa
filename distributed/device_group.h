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
#include "distributed/collective_checks.h"
#include "distributed/collective_kernels.h"
#include "distributed/group_membership.h"
#include "distributed/process_group.h"
#ifdef KILN_WITH_VULKAN
#include "distributed/vulkan_collectives.h"
#endif
#include "distributed/rendezvous.h"
#include "tensor/tensor.h"

namespace kiln::distributed {

struct GroupOptions {
  // How long a member waits for the others at each meeting before the group gives up.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // Set: this group is one process's part of a world (process_group.h). Its collectives then
  // run over every member of every process: global member p * size() + r is local member r
  // of rank p, every process must have the same number of local devices, and roots and
  // reduce-scatter parts count global members.
  std::shared_ptr<ProcessGroup> process_group;
};

// Runs call(rank) for every member of a group of `size` on a thread of its own (rank 0 on
// this one): the results in rank order, or the first error.
template <class T, class F>
absl::StatusOr<std::vector<T>> OnEveryMember(int size, size_t given, F call) {
  if (static_cast<int>(given) != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("a list call needs one tensor per member: got ", given, " for a group of ", size));
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
class DeviceGroup : public GroupMembership<typename B::Device> {
  using GroupMembership<typename B::Device>::devices_;
  using GroupMembership<typename B::Device>::world_;

 public:
  using GroupMembership<typename B::Device>::size;
  using GroupMembership<typename B::Device>::global_size;
  using GroupMembership<typename B::Device>::global_rank;
  using GroupMembership<typename B::Device>::processes;
  using Device = typename B::Device;
  using P = typename B::Primitive;
  using K = CollectiveKernels<B>;
  using Staged = typename K::Staged;

  DeviceGroup(std::vector<Device> devices, GroupOptions options = {})
      : GroupMembership<Device>(std::move(devices), std::move(options.process_group)),
        rendezvous_(size(), options.timeout),
        slots_(devices_.size()) {}
  DeviceGroup(const DeviceGroup&) = delete;
  DeviceGroup& operator=(const DeviceGroup&) = delete;

  // ---- Per-device calls ---------------------------------------------------------------------
  absl::StatusOr<Tensor<B>> AllReduce(int rank, const Tensor<B>& t, ReduceOp kind, absl::string_view tag = "") {
    return AllReduceImpl(rank, t, kind, tag, /*consumed=*/false);
  }
  // The same, consuming `t` (a temporary, such as gradient sync's bucket): across processes
  // with one local member, when nothing else refers to its memory, the result is reduced in
  // it, which saves a pass over memory.
  absl::StatusOr<Tensor<B>> AllReduce(int rank, Tensor<B>&& t, ReduceOp kind, absl::string_view tag = "") {
    const Tensor<B> mine = std::move(t);
    return AllReduceImpl(rank, mine, kind, tag, /*consumed=*/true);
  }

  // The root's tensor on every member.
  absl::StatusOr<Tensor<B>> Broadcast(int rank, const Tensor<B>& t, int root, absl::string_view tag = "") {
    if (absl::Status s = CheckRoot(root, global_size()); !s.ok()) return s;
    const std::string sig = absl::StrCat("broadcast(root ", root, ")", Describe(t, tag));
    absl::Status s = Enter(rank, t, sig);
    if (!s.ok()) return s;
    if (!world_) return Leave(rank, slots_[root]);
    // The root's process sends its member's staged tensor; the others receive into one buffer.
    const int root_process = root / size(), root_member = root % size();
    const bool sending = world_->rank() == root_process;
    if (!sending) rendezvous_.Once([&] { shared_ = K::Allocate(t.shape(), t.dtype(), devices_[0]); });
    const Staged& result = sending ? slots_[root_member] : shared_;
    s = AcrossProcesses(rank, sig, [&](const std::string& call) {
      void* data = sending ? const_cast<void*>(K::Data(result)) : K::MutableData(result);
      return world_->Broadcast(call, data, t.numel() * DTypeSize(t.dtype()), root_process);
    });
    if (!s.ok()) return s;
    return Leave(rank, result);
  }

  // Every member's tensor, concatenated along dim 0 in member order.
  absl::StatusOr<Tensor<B>> AllGather(int rank, const Tensor<B>& t, absl::string_view tag = "") {
    if (absl::Status s = CheckGatherable(t); !s.ok()) return s;
    const std::string sig = absl::StrCat("all_gather", Describe(t, tag));
    absl::Status s = Enter(rank, t, sig);
    if (!s.ok()) return s;
    rendezvous_.Once([&] {
      Dims dims(t.shape().dims().begin(), t.shape().dims().end());
      dims[0] *= global_size();
      shared_ = K::Allocate(Shape(dims), t.dtype(), devices_[0]);
    });
    const int64_t n = t.numel();
    K::CopyInto(t.dtype(), K::Data(slots_[rank]), K::MutableData(shared_), global_rank(rank) * n, n);
    if (world_) {
      s = AcrossProcesses(rank, sig, [&](const std::string& call) {
        return world_->AllGather(call, K::MutableData(shared_), size() * n * DTypeSize(t.dtype()));
      });
      if (!s.ok()) return s;
      return Leave(rank, shared_);  // the cross-process stage was a meeting
    }
    return LeaveShared(rank);
  }

  // Member r gets the reduction over all members of rows [r*d/N, (r+1)*d/N) of dim 0.
  absl::StatusOr<Tensor<B>> ReduceScatter(int rank, const Tensor<B>& t, ReduceOp kind, absl::string_view tag = "") {
    if (absl::Status s = CheckScatterable(t, global_size()); !s.ok()) return s;
    const std::string sig = absl::StrCat("reduce_scatter(", OpName(kind), ")", Describe(t, tag));
    absl::Status s = Enter(rank, t, sig);
    if (!s.ok()) return s;
    Dims dims(t.shape().dims().begin(), t.shape().dims().end());
    dims[0] /= global_size();
    const Staged out = K::Allocate(Shape(dims), t.dtype(), devices_[rank]);
    const int64_t part = t.numel() / global_size();
    if (world_) return ReduceScatterAcrossProcesses(rank, t, kind, sig, out, part);
    const int64_t bytes = part * DTypeSize(t.dtype());
    std::vector<const void*> inputs;
    for (const void* p : Inputs()) inputs.push_back(static_cast<const std::byte*>(p) + rank * bytes);
    K::Reduce(kind, t.dtype(), inputs, K::MutableData(out), 0, part, devices_[rank]);
    return Leave(rank, out);
  }

  // ---- List calls: tensors[i] lives on member i --------------------------------------------
  absl::StatusOr<std::vector<Tensor<B>>> AllReduce(absl::Span<const Tensor<B>> tensors, ReduceOp kind) {
    return OnEveryMember<Tensor<B>>(size(), tensors.size(), [&](int r) { return AllReduce(r, tensors[r], kind); });
  }
  absl::StatusOr<std::vector<Tensor<B>>> Broadcast(absl::Span<const Tensor<B>> tensors, int root) {
    return OnEveryMember<Tensor<B>>(size(), tensors.size(), [&](int r) { return Broadcast(r, tensors[r], root); });
  }
  absl::StatusOr<std::vector<Tensor<B>>> AllGather(absl::Span<const Tensor<B>> tensors) {
    return OnEveryMember<Tensor<B>>(size(), tensors.size(), [&](int r) { return AllGather(r, tensors[r]); });
  }
  absl::StatusOr<std::vector<Tensor<B>>> ReduceScatter(absl::Span<const Tensor<B>> tensors, ReduceOp kind) {
    return OnEveryMember<Tensor<B>>(size(), tensors.size(), [&](int r) { return ReduceScatter(r, tensors[r], kind); });
  }

 private:
  absl::StatusOr<Tensor<B>> AllReduceImpl(int rank, const Tensor<B>& t, ReduceOp kind, absl::string_view tag,
                                          bool consumed) {
    const std::string sig = absl::StrCat("all_reduce(", OpName(kind), ")", Describe(t, tag));
    absl::Status s = Enter(rank, t, sig);
    if (!s.ok()) return s;
    bool in_place = false;
    if constexpr (requires(const Staged& st) { K::Writable(st); }) {
      in_place = consumed && world_ && size() == 1 && K::Writable(slots_[0]);
    }
    rendezvous_.Once([&] { shared_ = in_place ? slots_[0] : K::Allocate(t.shape(), t.dtype(), devices_[0]); });
    const int64_t n = t.numel();
    if (!world_) {
      K::Reduce(kind, t.dtype(), Inputs(), K::MutableData(shared_), n * rank / size(), n * (rank + 1) / size(),
                devices_[rank]);
      return LeaveShared(rank);
    }
    // Sum locally, sum across processes, divide once for a mean. With one member there is
    // nothing to sum locally: the process group reads the input (which a collective leaves
    // untouched, unless it was consumed) and writes the result, with no copy in between.
    const ReduceOp local = kind == ReduceOp::kMean ? ReduceOp::kSum : kind;
    const bool one = size() == 1;
    if (!one) {
      K::Reduce(local, t.dtype(), Inputs(), K::MutableData(shared_), n * rank / size(), n * (rank + 1) / size(),
                devices_[rank]);
    }
    s = AcrossProcesses(rank, sig, [&](const std::string& call) {
      const void* in = one ? K::Data(slots_[0]) : K::Data(shared_);
      absl::Status st = world_->AllReduce(call, in, K::MutableData(shared_), n, t.dtype(), local);
      if (st.ok() && kind == ReduceOp::kMean)
        K::Divide(t.dtype(), K::MutableData(shared_), n, global_size(), devices_[rank]);
      return st;
    });
    if (!s.ok()) return s;
    return Leave(rank, shared_);  // the cross-process stage was a meeting: every part is written
  }

  // The cross-process stage, run by the last local member to get here once every local member
  // has done its part: op(call), where the process group compares `call` across the ranks
  // before it moves anything.
  template <class F>
  absl::Status AcrossProcesses(int rank, const std::string& signature, F op) {
    return rendezvous_.Together(
        rank, [&]() -> absl::Status { return op(absl::StrCat(signature, " on ", size(), " local device(s)")); });
  }

  // Reduce-scatter over processes: every member sums its chunk of the whole tensor locally,
  // the process group reduce-scatters that by process (this process's part lands first), and
  // member r takes its part of that.
  absl::StatusOr<Tensor<B>> ReduceScatterAcrossProcesses(int rank, const Tensor<B>& t, ReduceOp kind,
                                                         const std::string& sig, const Staged& out, int64_t part) {
    const ReduceOp local = kind == ReduceOp::kMean ? ReduceOp::kSum : kind;
    const int64_t n = t.numel();
    rendezvous_.Once([&] { shared_ = K::Allocate(t.shape(), t.dtype(), devices_[0]); });
    K::Reduce(local, t.dtype(), Inputs(), K::MutableData(shared_), n * rank / size(), n * (rank + 1) / size(),
              devices_[rank]);
    absl::Status s = AcrossProcesses(rank, sig, [&](const std::string& call) {
      absl::Status st = world_->ReduceScatter(call, K::MutableData(shared_), n, t.dtype(), local);
      if (st.ok() && kind == ReduceOp::kMean) {
        K::Divide(t.dtype(), K::MutableData(shared_), n / processes(), global_size(), devices_[rank]);
      }
      return st;
    });
    if (!s.ok()) return s;
    const std::byte* mine = static_cast<const std::byte*>(K::Data(shared_)) + rank * part * DTypeSize(t.dtype());
    K::CopyInto(t.dtype(), mine, K::MutableData(out), 0, part);
    return Leave(rank, out);
  }

  // Checks the member, publishes its dense input and meets the others.
  absl::Status Enter(int rank, const Tensor<B>& t, const std::string& signature) {
    if (absl::Status s = CheckMember(rank, t, devices_); !s.ok()) return s;
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
