// DeviceGroup<Autodiff<B>>: the same collectives on tensors that record gradients. Each is a
// node of the graph whose backward is itself a collective over the same group, run by every
// member during its own backward pass:
//   all_reduce (sum, mean)  -> all_reduce of the gradient with the same op
//   all_reduce (max, min)   -> the summed gradient, to the members that held the extreme
//   all_gather              <-> reduce_scatter (sum)
//   broadcast               -> the gradients summed onto the root
#ifndef KILN_DISTRIBUTED_AUTODIFF_GROUP_H_
#define KILN_DISTRIBUTED_AUTODIFF_GROUP_H_

#include <memory>

#include "autodiff/autodiff.h"
#include "distributed/device_group.h"

namespace kiln::distributed {

template <Backend B>
class DeviceGroup<Autodiff<B>> {
 public:
  using AD = Autodiff<B>;
  using Inner = B;  // the backend this group's autodiff tensors wrap
  using Device = typename B::Device;
  using P = typename B::Primitive;

  explicit DeviceGroup(std::vector<Device> devices, GroupOptions options = {})
      : inner_(std::make_shared<DeviceGroup<B>>(std::move(devices), options)) {}

  int size() const { return inner_->size(); }
  const std::vector<Device>& devices() const { return inner_->devices(); }
  int processes() const { return inner_->processes(); }
  int global_size() const { return inner_->global_size(); }
  int global_rank(int member) const { return inner_->global_rank(member); }
  const FlightRecorder& flight_recorder() const { return inner_->flight_recorder(); }
  // The same devices without gradients (gradient sync runs its buckets here).
  DeviceGroup<B>& inner() { return *inner_; }
  const DeviceGroup<B>& inner() const { return *inner_; }

  absl::StatusOr<Tensor<AD>> AllReduce(int member, const Tensor<AD>& t, ReduceOp kind, absl::string_view tag = "") {
    auto out = inner_->AllReduce(member, t.inner(), kind, tag);
    if (!out.ok()) return out.status();
    auto group = inner_;
    const std::string back = absl::StrCat(tag, "/backward");
    const P x = t.inner().primitive(), y = out->primitive();
    return Tensor<AD>(AD::Record(out->primitive(), {t.primitive()}, [=](const P& g, uint32_t) {
      const Tensor<B> grad(g);
      if (kind == ReduceOp::kSum || kind == ReduceOp::kMean) {
        return typename AD::Grads{Value(group->AllReduce(member, grad, kind, back)).primitive()};
      }
      // Members holding the extreme share the summed gradient.
      const Tensor<B> hit = Tensor<B>(x).eq(Tensor<B>(y)).to(grad.dtype());
      const Tensor<B> total = Value(group->AllReduce(member, grad, ReduceOp::kSum, back));
      const Tensor<B> holders = Value(group->AllReduce(member, hit, ReduceOp::kSum, back + "/ties"));
      return typename AD::Grads{(hit * total / holders).primitive()};
    }));
  }

  absl::StatusOr<Tensor<AD>> Broadcast(int member, const Tensor<AD>& t, int root, absl::string_view tag = "") {
    auto out = inner_->Broadcast(member, t.inner(), root, tag);
    if (!out.ok()) return out.status();
    auto group = inner_;
    const std::string back = absl::StrCat(tag, "/backward");
    return Tensor<AD>(AD::Record(out->primitive(), {t.primitive()}, [=](const P& g, uint32_t) {
      const Tensor<B> sum = Value(group->AllReduce(member, Tensor<B>(g), ReduceOp::kSum, back));
      return typename AD::Grads{(group->global_rank(member) == root ? sum : sum * 0).primitive()};
    }));
  }

  absl::StatusOr<Tensor<AD>> AllGather(int member, const Tensor<AD>& t, absl::string_view tag = "") {
    auto out = inner_->AllGather(member, t.inner(), tag);
    if (!out.ok()) return out.status();
    auto group = inner_;
    const std::string back = absl::StrCat(tag, "/backward");
    return Tensor<AD>(AD::Record(out->primitive(), {t.primitive()}, [=](const P& g, uint32_t) {
      return typename AD::Grads{Value(group->ReduceScatter(member, Tensor<B>(g), ReduceOp::kSum, back)).primitive()};
    }));
  }

  absl::StatusOr<Tensor<AD>> ReduceScatter(int member, const Tensor<AD>& t, ReduceOp kind, absl::string_view tag = "") {
    if (kind != ReduceOp::kSum && kind != ReduceOp::kMean) {
      return absl::UnimplementedError(
          absl::StrCat("reduce_scatter(", OpName(kind), ") is not differentiable in kiln; use sum or mean"));
    }
    auto out = inner_->ReduceScatter(member, t.inner(), kind, tag);
    if (!out.ok()) return out.status();
    auto group = inner_;
    const std::string back = absl::StrCat(tag, "/backward");
    const int n = global_size();
    return Tensor<AD>(AD::Record(out->primitive(), {t.primitive()}, [=](const P& g, uint32_t) {
      Tensor<B> gathered = Value(group->AllGather(member, Tensor<B>(g), back));
      if (kind == ReduceOp::kMean) gathered = gathered / n;
      return typename AD::Grads{gathered.primitive()};
    }));
  }

  // List calls, as for DeviceGroup<B>; with gradients these need every member's backward to
  // run on its own thread too, so they are mostly for tests.
  absl::StatusOr<std::vector<Tensor<AD>>> AllReduce(absl::Span<const Tensor<AD>> ts, ReduceOp kind) {
    return OnEveryMember<Tensor<AD>>(size(), ts.size(), [&](int r) { return AllReduce(r, ts[r], kind); });
  }
  absl::StatusOr<std::vector<Tensor<AD>>> AllGather(absl::Span<const Tensor<AD>> ts) {
    return OnEveryMember<Tensor<AD>>(size(), ts.size(), [&](int r) { return AllGather(r, ts[r]); });
  }

 private:
  // A collective inside backward has no status to return: its failure ends that backward.
  static Tensor<B> Value(absl::StatusOr<Tensor<B>> r) {
    if (!r.ok()) throw Error(r.status());
    return *std::move(r);
  }

  std::shared_ptr<DeviceGroup<B>> inner_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_AUTODIFF_GROUP_H_
