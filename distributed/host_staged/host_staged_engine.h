// The host-staged engine of a device group (CPU and Vulkan): members meet in process, each
// publishes a dense staged copy of its tensor (CollectiveKernels<B>: in place on the CPU,
// through host memory on Vulkan), reduces its own chunk of the result in member order (so
// every member and run gets the same bits), and, across processes, the last local member to
// arrive runs the process group's collective on the staged buffer before everyone takes the
// result back onto its device. It registers itself (EngineOf, at the end) for every backend
// whose folder specialises CollectiveKernels (backends/collective_kernels.h).
#ifndef KILN_DISTRIBUTED_HOST_STAGED_HOST_STAGED_ENGINE_H_
#define KILN_DISTRIBUTED_HOST_STAGED_HOST_STAGED_ENGINE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/registry.h"
#include "distributed/collective_call.h"
#include "distributed/engine.h"
#include "distributed/group_membership.h"
#include "distributed/group_options.h"
#include "distributed/meeting.h"
#include "tensor/tensor.h"

namespace kiln::distributed {

template <Backend B>
class HostStagedEngine {
 public:
  using Device = typename B::Device;
  using P = typename B::Primitive;
  using K = CollectiveKernels<B>;
  using Staged = typename K::Staged;

  // `members` outlives the engine (the group holds both).
  HostStagedEngine(const GroupMembership<Device>& members, const GroupOptions& options)
      : m_(members), meeting_(members.size(), options.timeout), slots_(members.size()) {}

  // Member `member`'s part of `call` on t (checked by the group: a member, on its device).
  // `consumed`: the caller gave t up, so an all-reduce may reduce in its memory.
  absl::StatusOr<Tensor<B>> Run(int member, const Tensor<B>& t, const CollectiveCall& call, bool consumed) {
    switch (call.collective) {
      case Collective::kAllReduce: return AllReduce(member, t, call, consumed);
      case Collective::kBroadcast: return Broadcast(member, t, call);
      case Collective::kAllGather: return AllGather(member, t, call);
      case Collective::kReduceScatter: return ReduceScatter(member, t, call);
      case Collective::kGradientSync: break;  // a group's use, never a call
    }
    return absl::InternalError("unknown collective");
  }

 private:
  const std::vector<Device>& devices() const { return m_.devices(); }
  ProcessGroup* world() const { return m_.process_group().get(); }
  int size() const { return m_.size(); }

  absl::StatusOr<Tensor<B>> AllReduce(int member, const Tensor<B>& t, const CollectiveCall& call, bool consumed) {
    absl::Status s = Enter(member, t, call);
    if (!s.ok()) return s;
    bool in_place = false;
    if constexpr (requires(const Staged& st) { K::Writable(st); }) {
      in_place = consumed && world() && size() == 1 && K::Writable(slots_[0]);
    }
    meeting_.Once([&] { shared_ = in_place ? slots_[0] : K::Allocate(t.shape(), t.dtype(), devices()[0]); });
    const int64_t n = t.numel();
    const int64_t begin = n * member / size(), end = n * (member + 1) / size();
    if (!world()) {
      K::Reduce(call.op, t.dtype(), Inputs(), K::MutableData(shared_), begin, end, devices()[member]);
      return LeaveShared(member);
    }
    // Sum locally, sum across processes, divide once for a mean. With one member there is
    // nothing to sum locally: the process group reads the input (which a collective leaves
    // untouched, unless it was consumed) and writes the result, with no copy in between.
    const ReduceOp local = call.op == ReduceOp::kMean ? ReduceOp::kSum : call.op;
    const bool one = size() == 1;
    if (!one) K::Reduce(local, t.dtype(), Inputs(), K::MutableData(shared_), begin, end, devices()[member]);
    s = AcrossProcesses(member, call, [&](const std::string& across) {
      const void* in = one ? K::Data(slots_[0]) : K::Data(shared_);
      absl::Status st = world()->AllReduce(across, in, K::MutableData(shared_), n, t.dtype(), local);
      if (st.ok() && call.op == ReduceOp::kMean) {
        K::Divide(t.dtype(), K::MutableData(shared_), n, m_.global_size(), devices()[member]);
      }
      return st;
    });
    if (!s.ok()) return s;
    return Leave(member, shared_);  // the cross-process stage was a meeting: every part is written
  }

  // The root's tensor on every member.
  absl::StatusOr<Tensor<B>> Broadcast(int member, const Tensor<B>& t, const CollectiveCall& call) {
    absl::Status s = Enter(member, t, call);
    if (!s.ok()) return s;
    if (!world()) return Leave(member, slots_[call.root]);
    // The root's process sends its member's staged tensor; the others receive into one buffer.
    const int root_process = call.root / size(), root_member = call.root % size();
    const bool sending = world()->rank() == root_process;
    if (!sending) meeting_.Once([&] { shared_ = K::Allocate(t.shape(), t.dtype(), devices()[0]); });
    const Staged& result = sending ? slots_[root_member] : shared_;
    s = AcrossProcesses(member, call, [&](const std::string& across) {
      void* data = sending ? const_cast<void*>(K::Data(result)) : K::MutableData(result);
      return world()->Broadcast(across, data, t.numel() * DTypeSize(t.dtype()), root_process);
    });
    if (!s.ok()) return s;
    return Leave(member, result);
  }

  // Every member's tensor, concatenated along dim 0 in member order.
  absl::StatusOr<Tensor<B>> AllGather(int member, const Tensor<B>& t, const CollectiveCall& call) {
    absl::Status s = Enter(member, t, call);
    if (!s.ok()) return s;
    meeting_.Once([&] {
      Dims dims(t.shape().dims().begin(), t.shape().dims().end());
      dims[0] *= m_.global_size();
      shared_ = K::Allocate(Shape(dims), t.dtype(), devices()[0]);
    });
    const int64_t n = t.numel();
    K::CopyInto(t.dtype(), K::Data(slots_[member]), K::MutableData(shared_), m_.global_rank(member) * n, n);
    if (world()) {
      s = AcrossProcesses(member, call, [&](const std::string& across) {
        return world()->AllGather(across, K::MutableData(shared_), size() * n * DTypeSize(t.dtype()));
      });
      if (!s.ok()) return s;
      return Leave(member, shared_);  // the cross-process stage was a meeting
    }
    return LeaveShared(member);
  }

  // Member r gets the reduction over all members of rows [r*d/N, (r+1)*d/N) of dim 0.
  absl::StatusOr<Tensor<B>> ReduceScatter(int member, const Tensor<B>& t, const CollectiveCall& call) {
    absl::Status s = Enter(member, t, call);
    if (!s.ok()) return s;
    Dims dims(t.shape().dims().begin(), t.shape().dims().end());
    dims[0] /= m_.global_size();
    const Staged out = K::Allocate(Shape(dims), t.dtype(), devices()[member]);
    const int64_t part = t.numel() / m_.global_size();
    if (world()) return ReduceScatterAcrossProcesses(member, t, call, out, part);
    const int64_t bytes = part * DTypeSize(t.dtype());
    std::vector<const void*> inputs;
    for (const void* p : Inputs()) inputs.push_back(static_cast<const std::byte*>(p) + member * bytes);
    K::Reduce(call.op, t.dtype(), inputs, K::MutableData(out), 0, part, devices()[member]);
    return Leave(member, out);
  }

  // Reduce-scatter over processes: every member sums its chunk of the whole tensor locally,
  // the process group reduce-scatters that by process (this process's part lands first), and
  // member r takes its part of that.
  absl::StatusOr<Tensor<B>> ReduceScatterAcrossProcesses(int member, const Tensor<B>& t, const CollectiveCall& call,
                                                         const Staged& out, int64_t part) {
    const ReduceOp local = call.op == ReduceOp::kMean ? ReduceOp::kSum : call.op;
    const int64_t n = t.numel();
    meeting_.Once([&] { shared_ = K::Allocate(t.shape(), t.dtype(), devices()[0]); });
    K::Reduce(local, t.dtype(), Inputs(), K::MutableData(shared_), n * member / size(), n * (member + 1) / size(),
              devices()[member]);
    absl::Status s = AcrossProcesses(member, call, [&](const std::string& across) {
      absl::Status st = world()->ReduceScatter(across, K::MutableData(shared_), n, t.dtype(), local);
      if (st.ok() && call.op == ReduceOp::kMean) {
        K::Divide(t.dtype(), K::MutableData(shared_), n / m_.processes(), m_.global_size(), devices()[member]);
      }
      return st;
    });
    if (!s.ok()) return s;
    const std::byte* mine = static_cast<const std::byte*>(K::Data(shared_)) + member * part * DTypeSize(t.dtype());
    K::CopyInto(t.dtype(), mine, K::MutableData(out), 0, part);
    return Leave(member, out);
  }

  // The cross-process stage, run by the last local member to get here once every local member
  // has done its part: op(call as the processes compare it), where the process group compares
  // that across the ranks before it moves anything.
  template <class F>
  absl::Status AcrossProcesses(int member, const CollectiveCall& call, F op) {
    return meeting_.Together(member, [&]() -> absl::Status { return op(call.AcrossProcesses(size())); });
  }

  // Publishes the member's dense input and meets the others.
  absl::Status Enter(int member, const Tensor<B>& t, const CollectiveCall& call) {
    slots_[member] = K::Stage(t.primitive());
    absl::Status s = meeting_.Arrive(member, call.signature);
    if (s.ok()) call.Started();
    return s;
  }

  std::vector<const void*> Inputs() const {
    std::vector<const void*> out;
    for (const Staged& p : slots_) out.push_back(K::Data(p));
    return out;
  }

  // Leave with the round's shared output, which every member wrote a part of.
  absl::StatusOr<Tensor<B>> LeaveShared(int member) {
    if constexpr (K::kUnstageCopies) {
      if (absl::Status s = meeting_.Settle(member); !s.ok()) return s;
    }
    return Leave(member, shared_);
  }

  // Waits until every member is done reading the others' inputs, then releases this one's.
  absl::StatusOr<Tensor<B>> Leave(int member, const Staged& result) {
    const P mine = K::Unstage(result, devices()[member]);
    absl::Status s = meeting_.Depart(member);
    if (!s.ok()) return s;
    return Tensor<B>(mine);
  }

  const GroupMembership<Device>& m_;
  Meeting meeting_;
  std::vector<Staged> slots_;  // member r's staged input for the current round
  Staged shared_;              // the output of the current round, when members share one
};

// The engine of every backend that stages its collectives (CPU, Vulkan); a backend with an
// engine of its own (CUDA: NCCL) has no CollectiveKernels.
template <class B>
requires requires { typename CollectiveKernels<B>::Staged; }
struct EngineOf<B> {
  using type = HostStagedEngine<B>;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_HOST_STAGED_HOST_STAGED_ENGINE_H_
