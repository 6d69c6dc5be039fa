// DataParallel: one replica of a model per device of a group, each driven by its own thread.
// At the start the parameters are broadcast from the first device and their shapes checked
// across replicas. A step splits the global batch along dim 0, runs forward and backward on
// every replica at once, all-reduces the gradients during backward (GradientSync), and steps
// every replica's optimizer on the same averaged gradients, so the replicas stay identical.
// With a process group in the device group, the same holds over every device of every process.
// SyncOptions::sharding splits the optimizer state and update (kOptimizer, ZeRO-1) and the
// gradients too (kGradients, ZeRO-2) over the members (sharded_update.h): each member then
// keeps 1/N of them, and the replicas still end every step bit-identical, and identical to
// an unsharded run's (clipping aside: its norm is summed in another order). kParameters
// (ZeRO-3) keeps only chunks of the parameters too, gathering each unit around its forward and
// backward (sharded_parameters.h); GatherParameters makes them whole for evaluation.
#ifndef KILN_DISTRIBUTED_DATA_PARALLEL_H_
#define KILN_DISTRIBUTED_DATA_PARALLEL_H_

#include <functional>
#include <memory>
#include <vector>

#include "distributed/autodiff_group.h"
#include "distributed/gradient_sync.h"
#include "distributed/member_threads.h"
#include "distributed/sharded_parameters.h"
#include "distributed/sharded_update.h"
#include "nn/clip.h"
#include "nn/loss_scaler.h"
#include "nn/module.h"
#include "nn/optim.h"

namespace kiln::distributed {

template <Backend B>
class DataParallel {
 public:
  using AD = Autodiff<B>;
  // The loss of one replica on its shard (averaged over the shard).
  using LossFn = std::function<Tensor<AD>(nn::Module<AD>& model, const Tensor<AD>& x, const Tensor<AD>& y)>;
  using OptimizerFactory = std::function<std::unique_ptr<nn::Optimizer<B>>()>;

  static absl::StatusOr<std::unique_ptr<DataParallel>> Create(const nn::Module<AD>& model,
                                                              std::shared_ptr<DeviceGroup<AD>> group,
                                                              const OptimizerFactory& make_optimizer,
                                                              SyncOptions options = {}) {
    std::unique_ptr<DataParallel> dp(new DataParallel(std::move(group), make_optimizer, options.sharding));
    const int n = dp->group_->size();
    for (int r = 0; r < n; ++r) {
      dp->replicas_.push_back(model.clone_to(dp->group_->devices()[r]));
      dp->optimizers_.push_back(make_optimizer());
    }
    if (absl::Status s = dp->CheckShardingAgrees(); !s.ok()) return s;
    std::vector<std::vector<Tensor<B>>> chunks(n);  // ZeRO-3: each member's, taken as they arrive
    if (absl::Status s = dp->BroadcastParameters(chunks); !s.ok()) return s;
    for (int r = 0; r < n; ++r) {
      dp->syncs_.push_back(std::make_unique<GradientSync<B>>(dp->group_->inner(), r, *dp->replicas_[r], options));
      if (options.sharding == Sharding::kNone) continue;
      dp->shards_.push_back(
          std::make_unique<ShardedUpdate<B>>(dp->group_->inner(), r, *dp->replicas_[r], dp->syncs_[r]->buckets()));
      if (options.sharding != Sharding::kParameters) continue;
      dp->sharded_params_.push_back(std::make_unique<ShardedParameters<B>>(
          dp->group_->inner(), r, *dp->replicas_[r], *dp->syncs_[r], std::move(chunks[r]), options.parameters));
    }
    return dp;
  }

  int size() const { return group_->size(); }
  Sharding sharding() const { return sharding_; }
  nn::Module<AD>& replica(int member) { return *replicas_[member]; }
  // Member r's optimizer; sharded, its state holds only the member's chunks (see FullOptimizer).
  nn::Optimizer<B>& optimizer(int member) { return *optimizers_[member]; }
  GradientSync<B>& sync(int member) { return *syncs_[member]; }
  // ZeRO-3: every replica's parameters whole (for evaluation, sampling, saving) until the next
  // Step; a collective of every member of every rank. Other stages hold them whole already.
  absl::Status GatherParameters() {
    if (sharded_params_.empty()) return absl::OkStatus();
    return threads_.Run([&](int r) { return sharded_params_[r]->GatherAll(); });
  }
  // ZeRO-3: after whole values were put into the replicas (a checkpoint loaded into them),
  // every member takes its chunks from them and frees them. Other stages: nothing to do.
  void ReshardParameters() {
    for (auto& p : sharded_params_) p->Reshard();
  }
  // A new optimizer from the factory Create was given (unstepped, empty state).
  std::unique_ptr<nn::Optimizer<B>> NewOptimizer() const { return make_optimizer_(); }

  // The optimizer as one unsharded member holds it: every slot at its parameter's shape (on
  // member 0's device), the step count and rate. What a checkpoint saves. Unsharded, member
  // 0's own; sharded, the members' chunks all-gathered: a collective, which every rank calls at
  // the same step (from the thread that calls Step: it runs the members itself).
  absl::StatusOr<std::shared_ptr<const nn::Optimizer<B>>> FullOptimizer() {
    if (shards_.empty()) return std::shared_ptr<const nn::Optimizer<B>>(std::shared_ptr<void>(), optimizers_[0].get());
    std::shared_ptr<nn::Optimizer<B>> full = make_optimizer_();
    typename nn::Optimizer<B>::State state;
    const absl::Status status = threads_.Run([&](int r) -> absl::Status {
      for (const std::string& slot : optimizers_[r]->slots()) {
        std::vector<Tensor<B>> chunks;
        for (const std::string& path : shards_[r]->paths()) {
          const auto it = optimizers_[r]->state().find(slot + "/" + path);
          if (it != optimizers_[r]->state().end()) chunks.push_back(it->second);
        }
        if (chunks.empty()) continue;  // not stepped yet
        if (chunks.size() != shards_[r]->paths().size()) {
          return absl::InternalError(absl::StrCat("DataParallel: member ", r, " has slot ", slot, " for ",
                                                  chunks.size(), " of ", shards_[r]->paths().size(), " parameters"));
        }
        auto all = shards_[r]->GatherAll(chunks, slot);
        if (!all.ok()) return all.status();
        if (r != 0) continue;  // only member 0 writes `state`
        for (size_t i = 0; i < chunks.size(); ++i) state.emplace(slot + "/" + shards_[r]->paths()[i], (*all)[i]);
      }
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    full->load_state(std::move(state), optimizers_[0]->steps());
    full->set_lr(optimizers_[0]->lr());
    return std::shared_ptr<const nn::Optimizer<B>>(std::move(full));
  }

  // Every member's optimizer from an unsharded one (FullOptimizer's form, as a checkpoint holds
  // it): its step count, rate and state, each slot cut to the member's chunk when sharded.
  void LoadFullOptimizer(const nn::Optimizer<B>& full) {
    for (int r = 0; r < size(); ++r) {
      typename nn::Optimizer<B>::State state;
      const auto device = group_->devices()[r];
      for (const auto& [key, t] : full.state()) {
        const Tensor<B> here = t.to(device);
        state.emplace(key, shards_.empty() ? here : ChunkOf(here, group_->global_rank(r), group_->global_size()));
      }
      optimizers_[r]->load_state(std::move(state), full.steps());
      optimizers_[r]->set_lr(full.lr());
    }
  }
  // Every member's random streams (its replica's named_generators, in order) over every
  // process, by global member index then stream: what a checkpoint keeps of them. A collective
  // when the model has any: every rank calls it at the same step.
  absl::StatusOr<std::vector<uint64_t>> GeneratorStates() {
    const int64_t per_member = static_cast<int64_t>(replicas_[0]->named_generators().size());
    if (per_member == 0) return std::vector<uint64_t>{};
    std::vector<std::vector<uint64_t>> gathered(size());
    const absl::Status status = threads_.Run([&](int r) -> absl::Status {
      std::vector<int64_t> mine;
      for (auto& [name, g] : replicas_[r]->named_generators()) mine.push_back(static_cast<int64_t>(g->state()));
      const auto device = group_->devices()[r];
      auto all = group_->inner().AllGather(r, Tensor<B>::from_vector(mine, {per_member}, device), "generator states");
      if (!all.ok()) return all.status();
      const TensorData host = all->to_data();
      for (int64_t v : host.values<int64_t>()) gathered[r].push_back(static_cast<uint64_t>(v));
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return gathered[0];
  }
  // Whether `states` can be GeneratorStates() of a run of this model with `members` members.
  absl::Status CheckGeneratorStates(const std::vector<uint64_t>& states, int members) {
    const size_t per_member = replicas_[0]->named_generators().size();
    if (members < 1 || states.size() != per_member * members) {
      return absl::InvalidArgumentError(absl::StrCat("DataParallel: ", states.size(), " generator states for ", members,
                                                     " members of ", per_member, " streams each"));
    }
    return absl::OkStatus();
  }
  // Sets the local members' streams from GeneratorStates() of a run with `members` global
  // members: the same world size continues every stream exactly; another one gives global
  // member g the streams of member g % members (dropout masks then differ from the old run's).
  absl::Status SetGeneratorStates(const std::vector<uint64_t>& states, int members) {
    if (absl::Status s = CheckGeneratorStates(states, members); !s.ok()) return s;
    const size_t per_member = replicas_[0]->named_generators().size();
    for (int r = 0; r < size(); ++r) {
      const size_t first = (group_->global_rank(r) % members) * per_member;
      auto generators = replicas_[r]->named_generators();
      for (size_t i = 0; i < per_member; ++i) *generators[i].second = Generator(states[first + i]);
    }
    return absl::OkStatus();
  }

  // Clips the synced gradients to a global L2 norm of max_norm before every step (0: off).
  // Every replica, on every rank, holds the same synced gradients, so all scale alike and the
  // replicas stay bit-identical.
  void set_clip_grad_norm(double max_norm) {
    if (!(max_norm >= 0 && std::isfinite(max_norm))) {
      ThrowInvalidArgument("DataParallel: clip_grad_norm %g must be >= 0", max_norm);
    }
    clip_grad_norm_ = max_norm;
  }

  // Dynamic loss scaling (nn/loss_scaler.h), for f16: every member scales its loss, unscales
  // its synced gradients and checks them; the members of every rank agree on whether any
  // gradient overflowed (an all-reduce of the flag), and an overflow anywhere skips the update
  // on every replica of every rank and backs the scale off. Off (nullopt) by default.
  void set_loss_scaler(std::optional<nn::LossScalerOptions> options) {
    scaler_.reset();
    if (options) scaler_.emplace(*options);
  }
  const nn::LossScaler* loss_scaler() const { return scaler_ ? &*scaler_ : nullptr; }
  nn::LossScaler* mutable_loss_scaler() { return scaler_ ? &*scaler_ : nullptr; }
  // Whether the last Step skipped its update (its gradients overflowed under loss scaling).
  bool last_step_skipped() const { return last_step_skipped_; }
  // The last Step's global gradient norm before clipping (for metrics); NaN when it did not clip.
  double last_grad_norm() const { return last_grad_norm_; }

  // One step on the global batch (x, y on any device); returns the mean loss over the batch.
  // Across processes (a group with a process group) every process passes the same global
  // batch and its members take their shards by global member index.
  absl::StatusOr<double> Step(const Tensor<B>& x, const Tensor<B>& y, const LossFn& loss) {
    if (absl::Status s = CheckBatch(x, y); !s.ok()) return s;
    std::vector<double> losses(size());
    overflowed_.assign(size(), false);
    last_grad_norm_ = NAN;
    const absl::Status status = threads_.Run([&](int r) -> absl::Status {
      absl::StatusOr<Tensor<B>> share = MemberStep(r, x, y, loss);
      if (!share.ok()) return share.status();
      losses[r] = share->template item<double>();  // the one wait of a step, after all its work is queued
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    last_step_skipped_ = overflowed_[0];
    if (scaler_) scaler_->Update(last_step_skipped_);  // every member decided alike (one all-reduce)
    if (group_->processes() > 1) return losses[0];
    double sum = 0;
    for (double l : losses) sum += l;
    return sum;
  }

  // Whether (x, y) is a global batch this group can split.
  absl::Status CheckBatch(const Tensor<B>& x, const Tensor<B>& y) const {
    const int n = group_->global_size();
    const int64_t total = x.size(0);
    if (y.size(0) != total || total < n) {
      return absl::InvalidArgumentError(absl::StrCat("DataParallel: a batch of ", total, " samples (labels: ",
                                                     y.size(0), ") cannot be split over ", n, " devices"));
    }
    return absl::OkStatus();
  }

  // Member r's part of Step, on its own thread (see RunOnMembers), for wrappers of the step
  // such as distributed/captured_step.h: forward on its shard, backward with the gradient
  // sync, the optimizer's update. Returns its share of the batch's mean loss as an f64 scalar
  // on its device without waiting for it (across processes, every process's shares summed).
  absl::StatusOr<Tensor<B>> MemberStep(int r, const Tensor<B>& x, const Tensor<B>& y, const LossFn& loss) {
    // Shards differ in size by at most one; weighting each replica's mean loss by its share
    // makes the averaged gradient that of the mean over the whole batch.
    const int n = group_->global_size();
    const int64_t total = x.size(0);
    const int g = group_->global_rank(r);
    const int64_t begin = total * g / n, end = total * (g + 1) / n;
    const auto device = group_->devices()[r];
    const Tensor<AD> xs = Tensor<AD>::from_inner(x.slice(0, begin, end).to(device));
    const Tensor<AD> ys = Tensor<AD>::from_inner(y.slice(0, begin, end).to(device));
    const double scale = scaler_ ? scaler_->scale() : 1.0;
    const double weight = static_cast<double>((end - begin) * n) / static_cast<double>(total) * scale;
    if (!sharded_params_.empty()) {
      if (absl::Status s = sharded_params_[r]->BeginStep(); !s.ok()) return s;
    }
    const Tensor<AD> l = loss(*replicas_[r], xs, ys);
    Tensor<B> share = l.detach().inner().to(DType::kF64);
    if (end - begin != total) share = share * static_cast<double>(end - begin) / static_cast<double>(total);
    const auto local = (weight == 1.0 ? l : l * weight).backward();
    absl::StatusOr<bool> skipped = shards_.empty() ? ReplicatedUpdate(r, local, scale) : ShardedStep(r, scale);
    if (!sharded_params_.empty()) sharded_params_[r]->EndStep();
    if (!skipped.ok()) return skipped.status();
    if (r < static_cast<int>(overflowed_.size())) overflowed_[r] = *skipped;
    if (group_->processes() > 1) {  // the other processes' shares of the loss
      auto sum = group_->inner().AllReduce(r, share.reshape({1}), ReduceOp::kSum, "loss");
      if (!sum.ok()) return sum.status();
      share = *sum;
    }
    return share;
  }

  // Runs job(member) on every local member's own thread, the one its steps run on.
  absl::Status RunOnMembers(const std::function<absl::Status(int member)>& job) { return threads_.Run(job); }

  const DeviceGroup<AD>& group() const { return *group_; }
  double clip_grad_norm() const { return clip_grad_norm_; }

  // ---- Sharded state (checkpoints) ----
  // Each member's part of the model state under the shard layout (nn/shard_layout.h, over the
  // global members), as a sharded checkpoint holds it: taken without a gather, and installed
  // back. Nothing else in a checkpoint's path reads or sets parameter values.

  // Every parameter's path, full shape and dtype, in parameter order.
  std::vector<std::tuple<std::string, Shape, DType>> ParameterLayout() {
    std::vector<std::tuple<std::string, Shape, DType>> out;
    for (auto& [path, p] : replicas_[0]->named_parameters()) out.emplace_back(path, p->shape(), p->dtype());
    return out;
  }
  // Local member r's chunk of every parameter, in parameter order: 1-D, zero-padded, its device.
  std::vector<Tensor<B>> ParameterChunks(int member) {
    if (!sharded_params_.empty()) return sharded_params_[member]->chunks();  // ZeRO-3 keeps nothing else
    std::vector<Tensor<B>> out;
    for (auto& [path, p] : replicas_[member]->named_parameters()) {
      out.push_back(ChunkOf(p->inner(), group_->global_rank(member), group_->global_size()));
    }
    return out;
  }
  // Local member r's chunks of its optimizer state ("<slot>/<path>"; sharded, the state itself).
  typename nn::Optimizer<B>::State OptimizerChunks(int member) {
    if (!shards_.empty()) return optimizers_[member]->state();
    typename nn::Optimizer<B>::State out;
    for (const auto& [key, t] : optimizers_[member]->state()) {
      out.emplace(key, ChunkOf(t, group_->global_rank(member), group_->global_size()));
    }
    return out;
  }
  // Installs every local member's chunks (sharded stages): parameters[r] (ParameterChunks'
  // form) all-gathered into replica r (ZeRO-3: kept as they are), optimizer[r] as optimizer
  // r's state at `steps` steps. A collective of every member: every rank calls it at once.
  absl::Status LoadChunks(std::vector<std::vector<Tensor<B>>> parameters,
                          std::vector<typename nn::Optimizer<B>::State> optimizer, int64_t steps) {
    if (shards_.empty()) return absl::FailedPreconditionError("DataParallel: unsharded members load whole tensors");
    return threads_.Run([&](int r) -> absl::Status {
      if (!sharded_params_.empty()) {
        sharded_params_[r]->set_chunks(std::move(parameters[r]));
        optimizers_[r]->load_state(std::move(optimizer[r]), steps);
        return absl::OkStatus();
      }
      auto params = replicas_[r]->named_parameters();
      absl::Status s = shards_[r]->GatherEach(parameters[r], "checkpoint parameters", [&](int i, Tensor<B> full) {
        *params[i].second = params[i].second->with_value(full);
      });
      if (s.ok()) optimizers_[r]->load_state(std::move(optimizer[r]), steps);
      return s;
    });
  }

 private:
  DataParallel(std::shared_ptr<DeviceGroup<AD>> group, OptimizerFactory make_optimizer, Sharding sharding)
      : group_(std::move(group)),
        make_optimizer_(std::move(make_optimizer)),
        sharding_(sharding),
        threads_(group_->size()) {}

  // Member r's update from its replica's local gradients, every member doing the whole update
  // on the same all-reduced gradients. Returns whether it skipped (loss-scale overflow).
  absl::StatusOr<bool> ReplicatedUpdate(int r, const Gradients<B>& local, double scale) {
    absl::StatusOr<Gradients<B>> synced = syncs_[r]->Finish(local);
    if (!synced.ok()) return synced.status();
    if (scaler_) {
      absl::StatusOr<bool> overflow = Overflowed(r, *synced, scale);
      if (!overflow.ok() || *overflow) return overflow;
    }
    if (clip_grad_norm_ > 0) {
      const double norm = nn::ClipGradNorm(*replicas_[r], *synced, clip_grad_norm_);
      if (r == 0) last_grad_norm_ = norm;
    }
    optimizers_[r]->step(*replicas_[r], *synced);
    return false;
  }

  // The same, sharded: member r updates its chunks, then every member's are gathered.
  absl::StatusOr<bool> ShardedStep(int r, double scale) {
    absl::StatusOr<std::vector<Tensor<B>>> chunks = syncs_[r]->FinishShards();
    if (!chunks.ok()) return chunks.status();
    ShardedUpdate<B>& shard = *shards_[r];
    if (scaler_) {
      absl::StatusOr<bool> overflow = shard.Unscale(*chunks, scale);
      if (!overflow.ok() || *overflow) return overflow;
    }
    if (clip_grad_norm_ > 0) {
      absl::StatusOr<double> norm = shard.Clip(*chunks, clip_grad_norm_);
      if (!norm.ok()) return norm.status();
      if (r == 0) last_grad_norm_ = *norm;
    }
    if (!sharded_params_.empty()) {  // ZeRO-3: the chunks are the parameters; the next forward gathers them
      ShardedParameters<B>& params = *sharded_params_[r];
      params.set_chunks(optimizers_[r]->step_pieces(shard.paths(), params.chunks(), *chunks));
      return false;
    }
    if (absl::Status s = shard.Step(*optimizers_[r], *chunks); !s.ok()) return s;
    return false;
  }

  // Across processes, every rank must shard alike (or they would run different collectives):
  // each learns every rank's stage, so all fail alike, naming the first that differs.
  absl::Status CheckShardingAgrees() {
    if (group_->processes() == 1) return absl::OkStatus();
    return threads_.Run([&](int r) -> absl::Status {
      const auto mine =
          Tensor<B>::from_vector(std::vector<int64_t>{static_cast<int64_t>(sharding_)}, {1}, group_->devices()[r]);
      auto all = group_->inner().AllGather(r, mine, "sharding");
      if (!all.ok()) return all.status();
      const TensorData host = all->to_data();
      const absl::Span<const int64_t> stages = host.values<int64_t>();
      for (size_t g = 0; g < stages.size(); ++g) {
        if (stages[g] == stages[0]) continue;
        return absl::InvalidArgumentError(
            absl::StrCat("DataParallel: the ranks disagree on sharding: global member 0 shards '",
                         ShardingName(static_cast<Sharding>(stages[0])), "' but global member ", g, " shards '",
                         ShardingName(static_cast<Sharding>(stages[g])), "'; pass every rank the same --shard"));
      }
      return absl::OkStatus();
    });
  }

  // Unscales member r's synced gradients; whether any member of any rank found inf or NaN.
  absl::StatusOr<bool> Overflowed(int r, Gradients<B>& synced, double scale) {
    return AnyMemberOverflowed(group_->inner(), r, nn::UnscaleGradients(*replicas_[r], synced, scale));
  }

  // Every replica takes replica 0's values, after its parameters' names and shapes are checked.
  // ZeRO-3: chunks[r] gets member r's chunk of each parameter and the replica's value is freed.
  absl::Status BroadcastParameters(std::vector<std::vector<Tensor<B>>>& chunks) {
    // From the only member to itself is the identity (and on CUDA would make an NCCL
    // communicator for nothing).
    const bool zero3 = sharding_ == Sharding::kParameters;
    if (group_->global_size() == 1 && !zero3) return absl::OkStatus();
    auto first = replicas_[0]->named_parameters();
    for (int r = 1; r < size(); ++r) {
      auto params = replicas_[r]->named_parameters();
      if (params.size() != first.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("replica ", r, " has ", params.size(), " parameters but replica 0 has ", first.size()));
      }
      for (size_t i = 0; i < params.size(); ++i) {
        if (params[i].first != first[i].first || params[i].second->shape() != first[i].second->shape()) {
          return absl::InvalidArgumentError(absl::StrCat("replica ", r, " parameter ", i, " is ", params[i].first, " ",
                                                         params[i].second->Describe(), " but replica 0 has ",
                                                         first[i].first, " ", first[i].second->Describe()));
        }
      }
    }
    // ZeRO-3 keeps each member's chunk of a parameter as it arrives and frees the rest, so no
    // member holds the whole model beside the one it was given.
    return threads_.Run([&](int r) -> absl::Status {
      for (auto& [name, p] : replicas_[r]->named_parameters()) {
        if (group_->global_size() > 1) {
          auto value = group_->inner().Broadcast(r, p->inner(), 0, absl::StrCat("broadcast ", name));
          if (!value.ok()) return value.status();
          *p = p->with_value(*value);
        }
        if (zero3) chunks[r].push_back(ShardedParameters<B>::TakeChunk(group_->inner(), r, *p));
      }
      return absl::OkStatus();
    });
  }

  std::shared_ptr<DeviceGroup<AD>> group_;
  OptimizerFactory make_optimizer_;
  Sharding sharding_;
  std::vector<std::unique_ptr<nn::Module<AD>>> replicas_;
  std::vector<std::unique_ptr<nn::Optimizer<B>>> optimizers_;
  double clip_grad_norm_ = 0;
  std::optional<nn::LossScaler> scaler_;
  std::vector<char> overflowed_;  // per member, in the current step (char: written by each member's thread)
  bool last_step_skipped_ = false;
  double last_grad_norm_ = NAN;  // written by member 0's thread within Step
  std::vector<std::unique_ptr<GradientSync<B>>> syncs_;
  std::vector<std::unique_ptr<ShardedUpdate<B>>> shards_;              // per member when sharded
  std::vector<std::unique_ptr<ShardedParameters<B>>> sharded_params_;  // per member under ZeRO-3
  MemberThreads threads_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_DATA_PARALLEL_H_
