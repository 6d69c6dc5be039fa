// DeviceGroup<B>: a fixed set of devices of one backend that run collectives together:
// all-reduce (sum, mean, max, min), broadcast, all-gather and reduce-scatter (both along
// dim 0). Two ways in: a per-member call, made by each member's own thread with its index,
// which meets the others with a deadline; and a list call with one tensor per member.
//
// This front end is written once for every backend: it checks the arguments, builds each
// call's signature (collective_call.h) and hands the call to the backend's engine
// (engines.h), which moves the data: the host-staged engine (every member reduces its own
// chunk, in member order, so results are bit-identical on every member and run) or NCCL.
#ifndef KILN_DISTRIBUTED_DEVICE_GROUP_H_
#define KILN_DISTRIBUTED_DEVICE_GROUP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "distributed/collective_call.h"
#include "distributed/collective_checks.h"
#include "distributed/engines.h"
#include "distributed/flight_recorder.h"
#include "distributed/group_membership.h"
#include "distributed/group_options.h"
#include "tensor/tensor.h"

namespace kiln::distributed {

template <Backend B>
class DeviceGroup : public GroupMembership<typename B::Device> {
 public:
  using Device = typename B::Device;
  using Engine = typename EngineOf<B>::type;
  static_assert(CollectiveEngine<Engine, B>);
  using GroupMembership<Device>::size;
  using GroupMembership<Device>::global_size;

  DeviceGroup(std::vector<Device> devices, GroupOptions options = {})
      : GroupMembership<Device>(std::move(devices), options.process_group),
        recorder_(size(), options),
        engine_(*this, options) {}
  DeviceGroup(const DeviceGroup&) = delete;
  DeviceGroup& operator=(const DeviceGroup&) = delete;

  // This group's flight recorder (every member's last calls).
  const FlightRecorder& flight_recorder() const { return recorder_; }

  // ---- Per-member calls ---------------------------------------------------------------------
  absl::StatusOr<Tensor<B>> AllReduce(int member, const Tensor<B>& t, ReduceOp op, absl::string_view tag = "") {
    return Run(member, t, tag, MakeCall(Collective::kAllReduce, op, 0, t, tag), /*consumed=*/false);
  }
  // The same, consuming `t` (a temporary, such as gradient sync's bucket): across processes
  // with one local member, when nothing else refers to its memory, the host-staged engine
  // reduces in it, which saves a pass over memory.
  absl::StatusOr<Tensor<B>> AllReduce(int member, Tensor<B>&& t, ReduceOp op, absl::string_view tag = "") {
    const Tensor<B> mine = std::move(t);
    return Run(member, mine, tag, MakeCall(Collective::kAllReduce, op, 0, mine, tag), /*consumed=*/true);
  }

  // The root's tensor on every member (root: a global member).
  absl::StatusOr<Tensor<B>> Broadcast(int member, const Tensor<B>& t, int root, absl::string_view tag = "") {
    if (absl::Status s = CheckRoot(root, global_size()); !s.ok()) return s;
    return Run(member, t, tag, MakeCall(Collective::kBroadcast, ReduceOp::kSum, root, t, tag), false);
  }

  // Every member's tensor, concatenated along dim 0 in member order.
  absl::StatusOr<Tensor<B>> AllGather(int member, const Tensor<B>& t, absl::string_view tag = "") {
    if (absl::Status s = CheckGatherable(t); !s.ok()) return s;
    return Run(member, t, tag, MakeCall(Collective::kAllGather, ReduceOp::kSum, 0, t, tag), false);
  }

  // Member r gets the reduction over all members of rows [r*d/N, (r+1)*d/N) of dim 0.
  absl::StatusOr<Tensor<B>> ReduceScatter(int member, const Tensor<B>& t, ReduceOp op, absl::string_view tag = "") {
    if (absl::Status s = CheckScatterable(t, global_size()); !s.ok()) return s;
    return Run(member, t, tag, MakeCall(Collective::kReduceScatter, op, 0, t, tag), false);
  }

  // ---- List calls: tensors[i] lives on member i --------------------------------------------
  absl::StatusOr<std::vector<Tensor<B>>> AllReduce(absl::Span<const Tensor<B>> ts, ReduceOp op) {
    return List(ts, Collective::kAllReduce, op, 0, [&](int r) { return AllReduce(r, ts[r], op); });
  }
  absl::StatusOr<std::vector<Tensor<B>>> Broadcast(absl::Span<const Tensor<B>> ts, int root) {
    if (absl::Status s = CheckRoot(root, global_size()); !s.ok()) return s;
    return List(ts, Collective::kBroadcast, ReduceOp::kSum, root, [&](int r) { return Broadcast(r, ts[r], root); });
  }
  absl::StatusOr<std::vector<Tensor<B>>> AllGather(absl::Span<const Tensor<B>> ts) {
    return List(ts, Collective::kAllGather, ReduceOp::kSum, 0, [&](int r) { return AllGather(r, ts[r]); });
  }
  absl::StatusOr<std::vector<Tensor<B>>> ReduceScatter(absl::Span<const Tensor<B>> ts, ReduceOp op) {
    return List(ts, Collective::kReduceScatter, op, 0, [&](int r) { return ReduceScatter(r, ts[r], op); });
  }

 private:
  // Every per-member call of every engine passes here, so this is where the flight recorder
  // sees it: from the checked call to its result.
  absl::StatusOr<Tensor<B>> Run(int member, const Tensor<B>& t, absl::string_view tag, CollectiveCall call,
                                bool consumed) {
    if (absl::Status s = CheckMember(member, t, this->devices()); !s.ok()) return s;
    recorder_.Enter(member, call, tag, t.dtype(), t.shape());
    absl::StatusOr<Tensor<B>> out = engine_.Run(member, t, call, consumed);
    if (call.recorder == nullptr) return out;
    if (absl::Status s = recorder_.End(member, call.seq, out.status()); !s.ok()) return s;
    return out;
  }

  // One thread per member, unless the engine drives every member from this one.
  template <class PerMember>
  absl::StatusOr<std::vector<Tensor<B>>> List(absl::Span<const Tensor<B>> ts, Collective collective, ReduceOp op,
                                              int root, PerMember per_member) {
    if constexpr (requires { engine_.RunList(ts, collective, op, root, per_member); }) {
      if (static_cast<int>(ts.size()) != size()) return OnEveryMember<Tensor<B>>(size(), ts.size(), per_member);
      for (int r = 0; r < size(); ++r) {
        if (absl::Status s = CheckMember(r, ts[r], this->devices()); !s.ok()) return s;
      }
      // Tensors that differ take the per-member path (recorded there), whose meeting names the
      // difference; the others are recorded here, one call per member.
      for (const Tensor<B>& t : ts) {
        if (t.shape() != ts[0].shape() || t.dtype() != ts[0].dtype()) {
          return OnEveryMember<Tensor<B>>(size(), ts.size(), per_member);
        }
      }
      if (collective == Collective::kAllGather) {
        if (absl::Status s = CheckGatherable(ts[0]); !s.ok()) return s;
      }
      if (collective == Collective::kReduceScatter) {
        if (absl::Status s = CheckScatterable(ts[0], global_size()); !s.ok()) return s;
      }
      std::vector<CollectiveCall> calls(size(), MakeCall(collective, op, root, ts[0], ""));
      for (int r = 0; r < size(); ++r) {
        recorder_.Enter(r, calls[r], "", ts[r].dtype(), ts[r].shape());
        calls[r].Started();  // one thread drives every member: nobody to meet
      }
      absl::StatusOr<std::vector<Tensor<B>>> out = engine_.RunList(ts, collective, op, root, per_member);
      absl::Status status = out.status();
      for (int r = 0; r < size(); ++r) {
        if (calls[r].recorder == nullptr) continue;
        if (absl::Status s = recorder_.End(r, calls[r].seq, out.status()); !s.ok()) status = s;
      }
      if (!status.ok()) return status;
      return out;
    } else {
      return OnEveryMember<Tensor<B>>(size(), ts.size(), per_member);
    }
  }

  FlightRecorder recorder_;
  Engine engine_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_DEVICE_GROUP_H_
