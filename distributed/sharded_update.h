// One member's side of a sharded data-parallel update (ZeRO-1/2, sharding.h): it holds its
// chunk of every parameter's reduced gradient (GradientSync::FinishShards), unscales and
// checks them (loss scaling) and clips them by the global norm agreed over every member, steps
// its optimizer on its chunks alone (so its optimizer state is its chunks: 1/N of the whole),
// then all-gathers every member's new chunks, bucket by bucket, into its replica's parameters.
// The update is element-wise, so the parameters end bit-identical to an unsharded step on the
// same gradients; the clipping norm is summed in another order (member by member), so a
// clipped step can differ from DDP's in the last bits of its factor.
#ifndef KILN_DISTRIBUTED_SHARDED_UPDATE_H_
#define KILN_DISTRIBUTED_SHARDED_UPDATE_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "distributed/device_group.h"
#include "distributed/shard_layout.h"
#include "nn/clip.h"
#include "nn/loss_scaler.h"
#include "nn/module.h"
#include "nn/optim.h"

namespace kiln::distributed {

// Whether any member of any rank flagged an overflow (`bad`: this member's flag from
// nn::UnscaleGradient; none when it had no gradient). One all-reduce, so all decide alike.
template <Backend B>
absl::StatusOr<bool> AnyMemberOverflowed(DeviceGroup<B>& group, int member, const std::optional<Tensor<B>>& bad) {
  if (!bad) return false;
  auto any = group.AllReduce(member, bad->reshape({1}), ReduceOp::kMax, "loss scale overflow");
  if (!any.ok()) return any.status();
  return any->template item<float>() != 0;
}

template <Backend B>
class ShardedUpdate {
 public:
  // `buckets`: parameter indices, as the gradient sync groups them (gathers travel alike).
  ShardedUpdate(DeviceGroup<B>& group, int member, nn::Module<Autodiff<B>>& replica,
                std::vector<std::vector<int>> buckets)
      : group_(group), member_(member), replica_(replica), buckets_(std::move(buckets)) {
    for (auto& [path, p] : replica_.named_parameters()) {
      paths_.push_back(path);
      shapes_.push_back(p->shape());
    }
  }

  int members() const { return group_.global_size(); }
  int rank() const { return group_.global_rank(member_); }

  // Divides the chunks by `scale`; whether any member of any rank found inf or NaN in its own.
  absl::StatusOr<bool> Unscale(std::vector<Tensor<B>>& chunks, double scale) {
    NoGradScope no_grad;
    std::optional<Tensor<B>> bad;
    for (Tensor<B>& c : chunks) c = nn::UnscaleGradient(c, scale, bad);
    return AnyMemberOverflowed(group_, member_, bad);
  }

  // Scales the chunks so that the L2 norm of every member's together is at most max_norm (the
  // squares summed in f64: this member's, then one all-reduce). Returns that norm.
  absl::StatusOr<double> Clip(std::vector<Tensor<B>>& chunks, double max_norm) {
    NoGradScope no_grad;
    Tensor<B> sum = Tensor<B>::zeros({1}, DType::kF64, group_.devices()[member_]);
    for (const Tensor<B>& c : chunks) {
      const Tensor<B> c64 = c.to(DType::kF64);
      sum = sum + (c64 * c64).sum().reshape({1});
    }
    auto total = group_.AllReduce(member_, sum, ReduceOp::kSum, "gradient norm");
    if (!total.ok()) return total.status();
    const double norm = std::sqrt(total->template item<double>());
    const double factor = nn::ClipFactor(norm, max_norm);
    if (factor < 1) {
      for (Tensor<B>& c : chunks) c = c * factor;
    }
    return norm;
  }

  // Steps `optimizer` on this member's chunks of the parameters and of their gradients, then
  // gathers every member's new chunks into the replica's parameters, one bucket at a time: a
  // bucket's gradient chunks and old values are freed once its new values are in, so a step
  // holds one bucket's new chunks and gathered parameters beside the model state, never a
  // second copy of every chunk. Empties `grad_chunks` as it goes.
  absl::Status Step(nn::Optimizer<B>& optimizer, std::vector<Tensor<B>>& grad_chunks) {
    optimizer.begin_pieces_step();
    auto params = replica_.named_parameters();
    for (size_t k = 0; k < buckets_.size(); ++k) {
      std::vector<std::string> paths;
      std::vector<Tensor<B>> values, grads;
      for (int i : buckets_[k]) {
        paths.push_back(paths_[i]);
        values.push_back(ChunkOf(params[i].second->inner(), rank(), members()));
        grads.push_back(std::move(grad_chunks[i]));
        grad_chunks[i] = Tensor<B>();
      }
      std::vector<Tensor<B>> updated = optimizer.update_pieces(paths, values, grads);
      values.clear();
      grads.clear();
      absl::Status s = GatherBucket(k, std::move(updated), "parameters", [&](int i, Tensor<B> full) {
        *params[i].second = params[i].second->with_value(full);
      });
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  absl::Status Step(nn::Optimizer<B>& optimizer, const std::vector<Tensor<B>>& grad_chunks) {
    std::vector<Tensor<B>> chunks = grad_chunks;
    return Step(optimizer, chunks);
  }

  // Every member's chunks of per-parameter tensors (a chunk per parameter, in parameter order)
  // gathered into the full tensors, bucket by bucket. A collective of every member.
  absl::StatusOr<std::vector<Tensor<B>>> GatherAll(const std::vector<Tensor<B>>& chunks, absl::string_view what) {
    std::vector<std::optional<Tensor<B>>> full(chunks.size());
    absl::Status s = GatherEach(chunks, what, [&](int i, Tensor<B> t) { full[i] = std::move(t); });
    if (!s.ok()) return s;
    std::vector<Tensor<B>> out;
    for (auto& t : full) out.push_back(*std::move(t));
    return out;
  }

  // The same, handing each full tensor to take(parameter index, tensor) as its bucket arrives.
  absl::Status GatherEach(const std::vector<Tensor<B>>& chunks, absl::string_view what,
                          const std::function<void(int, Tensor<B>)>& take) {
    for (size_t k = 0; k < buckets_.size(); ++k) {
      std::vector<Tensor<B>> mine;
      for (int i : buckets_[k]) mine.push_back(chunks[i]);
      if (absl::Status s = GatherBucket(k, std::move(mine), what, take); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  const std::vector<std::string>& paths() const { return paths_; }
  const std::vector<Shape>& shapes() const { return shapes_; }

 private:
  // Bucket k gathered from every member's `mine` (its chunk of each parameter of the bucket,
  // in bucket order); each full tensor handed to take(parameter index, tensor).
  absl::Status GatherBucket(size_t k, std::vector<Tensor<B>> mine, absl::string_view what,
                            const std::function<void(int, Tensor<B>)>& take) {
    std::vector<Shape> shapes;
    for (int i : buckets_[k]) shapes.push_back(shapes_[i]);
    absl::StatusOr<Tensor<B>> all = (mine.size() == 1 ? mine[0] : Tensor<B>::cat(mine, 0)).reshape({-1});
    mine.clear();
    if (members() > 1) all = group_.AllGather(member_, *all, absl::StrCat("gather ", what, " bucket ", k));
    if (!all.ok()) return all.status();
    UnpackMemberMajorEach(*all, shapes, members(), [&](size_t j, Tensor<B> t) { take(buckets_[k][j], std::move(t)); });
    return absl::OkStatus();
  }

  DeviceGroup<B>& group_;
  const int member_;
  nn::Module<Autodiff<B>>& replica_;
  const std::vector<std::vector<int>> buckets_;
  std::vector<std::string> paths_;
  std::vector<Shape> shapes_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_SHARDED_UPDATE_H_
