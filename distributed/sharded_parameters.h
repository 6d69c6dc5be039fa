// One member's parameters under ZeRO-3 (Sharding::kParameters, FSDP): the member keeps only its
// chunk of every parameter (shard_layout.h), the master its optimizer steps, and its replica's
// parameters hold a one-element placeholder of their shape (a NaN expanded view) between uses.
//
// Units (Module::shard_units: a TransformerBlock, a Sequential's layer) are gathered just before
// their forward and freed after it; the parameters outside every unit (the root: embeddings, a
// final norm) are gathered for a whole step. With reshard_after_forward, a unit's forward keeps
// no graph (nn::RecomputeForward) and its backward gathers the unit again, recomputes and frees
// it, so at most a unit or two are whole at once; without, the graph keeps what the forward
// used until backward frees it (no second gather, no recompute, more memory in the step).
// With prefetch, the gather of the next unit (in forward order, then in backward order) is
// queued while the current one computes.
//
// Every gather is a job on the member's gradient-sync thread (GradientSync::Enqueue), so the
// gathers and the gradients' reduce-scatters run in one order on every member.
#ifndef KILN_DISTRIBUTED_SHARDED_PARAMETERS_H_
#define KILN_DISTRIBUTED_SHARDED_PARAMETERS_H_

#include <cmath>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "distributed/device_group.h"
#include "distributed/gradient_sync.h"
#include "distributed/shard_layout.h"
#include "distributed/sharding.h"
#include "nn/module.h"
#include "nn/recompute.h"

namespace kiln::distributed {

template <Backend B>
class ShardedParameters {
 public:
  using AD = Autodiff<B>;

  // `chunks`: this member's chunk of every parameter (TakeChunk), whose replica values are
  // freed already (placeholders), so no member ever holds every parameter whole.
  ShardedParameters(DeviceGroup<B>& group, int member, nn::Module<AD>& replica, GradientSync<B>& sync,
                    std::vector<Tensor<B>> chunks, ParameterShardingOptions options = {})
      : group_(group), member_(member), sync_(sync), options_(options), chunks_(std::move(chunks)) {
    auto params = replica.named_parameters();
    absl::flat_hash_map<const Tensor<AD>*, int> index;
    for (size_t i = 0; i < params.size(); ++i) {
      params_.push_back(params[i].second);
      index[params[i].second] = static_cast<int>(i);
    }
    std::vector<bool> in_unit(params.size(), false);
    for (auto& [path, module] : replica.shard_units()) {
      Unit unit{.module = module};
      for (auto& [name, p] : module->named_parameters()) {
        unit.params.push_back(index.at(p));
        in_unit[index.at(p)] = true;
      }
      if (!unit.params.empty()) units_.push_back(std::move(unit));
    }
    Unit root;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!in_unit[i]) root.params.push_back(static_cast<int>(i));
    }
    units_.push_back(std::move(root));  // last: gathered for the whole step
    for (int k = 0; k + 1 < static_cast<int>(units_.size()); ++k) InstallWrapper(k);
    FlattenUnits();
  }
  ~ShardedParameters() {
    for (int k = 0; k + 1 < static_cast<int>(units_.size()); ++k) units_[k].module->set_around_forward(nullptr);
  }
  ShardedParameters(const ShardedParameters&) = delete;
  ShardedParameters& operator=(const ShardedParameters&) = delete;

  // This member's chunk of every parameter, in parameter order: what its optimizer steps.
  const std::vector<Tensor<B>>& chunks() const { return chunks_; }
  // New chunks (the optimizer's update, a loaded checkpoint's): whatever is whole is freed.
  void set_chunks(std::vector<Tensor<B>> chunks) {
    gathered_all_ = false;
    ReleaseAll();
    chunks_ = std::move(chunks);
    FlattenUnits();
  }
  // How many units (without the root) the replica was cut into.
  int unit_count() const { return static_cast<int>(units_.size()) - 1; }

  // Before a step's forward: the root whole, the first unit's gather queued.
  absl::Status BeginStep() {
    gathered_all_ = false;
    ReleaseAll();
    if (absl::Status s = Install(Root()); !s.ok()) return s;
    if (options_.prefetch && unit_count() > 0) Prefetch(0);
    return absl::OkStatus();
  }
  // After the step's update (no collective is queued then): every parameter freed.
  void EndStep() { ReleaseAll(); }

  // Every parameter whole in the replica (for evaluation, sampling, saving), until the next
  // step or Reshard. A collective of every member.
  absl::Status GatherAll() {
    if (gathered_all_) return absl::OkStatus();
    ReleaseAll();  // what a step left whole may hold gather_dtype's rounding
    for (int k = 0; k < static_cast<int>(units_.size()); ++k) {
      if (absl::Status s = Install(k, /*exact=*/true); !s.ok()) return s;
    }
    gathered_all_ = true;  // the units' forwards then neither gather nor free
    return absl::OkStatus();
  }
  // Takes this member's chunks from the replica's whole parameters (after they were loaded
  // or gathered), then frees them.
  void Reshard() {
    gathered_all_ = false;
    for (Unit& unit : units_) {
      DropGather(unit);
      unit.whole = false;
    }
    for (size_t i = 0; i < params_.size(); ++i) chunks_[i] = TakeChunk(group_, member_, *params_[i]);
    FlattenUnits();
  }
  // This member's chunk of p's whole value (its own memory, not a view of it), p freed.
  static Tensor<B> TakeChunk(DeviceGroup<B>& group, int member, Tensor<AD>& p) {
    const Tensor<B> chunk = ChunkOf(p.inner(), group.global_rank(member), group.global_size());
    Tensor<B> own = Tensor<B>::cat(std::vector<Tensor<B>>{chunk}, 0);
    p = p.with_value(Placeholder(p));
    return own;
  }

 private:
  struct Unit {
    nn::Module<AD>* module = nullptr;  // null for the root
    std::vector<int> params;
    bool whole = false;  // the replica holds its parameters' values
    std::shared_ptr<std::vector<Tensor<B>>> arriving;
    std::optional<std::future<absl::Status>> gather;  // queued, not yet installed
    std::optional<Tensor<B>> flat;                    // its chunks, which are views of it (FlattenUnits)
  };

  int Root() const { return static_cast<int>(units_.size()) - 1; }

  // Each unit's chunks as views of one flat tensor, so that its gathers (forward's and
  // backward's) send that as it is: concatenated per gather, a unit's chunks were copied twice
  // a step, the copy beside the forward's or backward's live tensors (in ZeRO-3's in-step peak).
  // Here the copy is once a step, after the update, when the step's activations are gone.
  void FlattenUnits() {
    for (Unit& unit : units_) {
      unit.flat.reset();
      if (unit.params.size() < 2) continue;
      std::vector<Tensor<B>> parts;
      for (int i : unit.params) parts.push_back(chunks_[i]);
      unit.flat = Tensor<B>::cat(parts, 0);
      parts.clear();
      int64_t at = 0;
      for (int i : unit.params) {
        const int64_t c = chunks_[i].numel();
        chunks_[i] = unit.flat->slice(0, at, at + c);
        at += c;
      }
    }
  }

  void InstallWrapper(int k) {
    nn::Module<AD>* module = units_[k].module;
    module->set_around_forward([this, k, module](const Tensor<AD>& x) {
      if (gathered_all_) return module->forward(x);
      ThrowIfError(Install(k));
      const bool training = GradEnabled();
      if (options_.prefetch && training && k + 1 < unit_count()) Prefetch(k + 1);
      auto forward = [module](const Tensor<AD>& in) { return module->forward(in); };
      Tensor<AD> out;
      if (options_.reshard_after_forward) {
        const nn::RecomputeHooks hooks{.before = [this, k] { InBackward(k); }, .after = [this, k] { Release(k); }};
        out = nn::RecomputeForward<AD>({module}, x, forward, hooks);
      } else {
        out = forward(x);
      }
      // The last unit is the first that backward gathers again: with prefetch it stays whole.
      const bool backward_next = options_.reshard_after_forward && options_.prefetch && k + 1 == unit_count();
      if (!(training && backward_next)) Release(k);
      return out;
    });
  }
  // Unit k about to be recomputed in backward: whole again, the one before it (the next in
  // backward) queued.
  void InBackward(int k) {
    ThrowIfError(Install(k));
    if (options_.prefetch && k > 0) Prefetch(k - 1);
  }

  // Queues unit k's gather unless it is whole or already queued; in gather_dtype unless exact.
  void Prefetch(int k, bool exact = false) {
    Unit& unit = units_[k];
    if (unit.whole || unit.gather) return;
    if (unit.params.empty()) {  // a root with no parameters of its own: nothing to gather
      unit.whole = true;
      return;
    }
    std::optional<DType> wire;  // not a ternary: GCC 12 then warns maybe-uninitialized
    if (!exact) wire = options_.gather_dtype;
    std::vector<Tensor<B>> mine;
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    for (int i : unit.params) {
      mine.push_back(wire ? chunks_[i].to(*wire) : chunks_[i]);
      shapes.push_back(params_[i]->shape());
      dtypes.push_back(params_[i]->dtype());
    }
    if (!wire && unit.flat) mine = {*unit.flat};  // FlattenUnits: no copy
    auto out = std::make_shared<std::vector<Tensor<B>>>();
    unit.arriving = out;
    const int n = group_.global_size();
    const std::string tag = absl::StrCat("gather unit ", k == Root() ? std::string("root") : absl::StrCat(k));
    unit.gather = sync_.Enqueue([&group = group_, member = member_, mine = std::move(mine), shapes = std::move(shapes),
                                 dtypes = std::move(dtypes), out, n, tag] {
      Tensor<B> flat = mine.size() == 1 ? mine[0] : Tensor<B>::cat(mine, 0);
      if (n > 1) {
        absl::StatusOr<Tensor<B>> all = group.AllGather(member, flat, tag);
        if (!all.ok()) return all.status();
        flat = *std::move(all);
      }
      *out = UnpackMemberMajor(flat, shapes, n);
      for (size_t j = 0; j < out->size(); ++j) (*out)[j] = (*out)[j].to(dtypes[j]);  // from gather_dtype
      return absl::OkStatus();
    });
  }

  // Unit k whole in the replica: its gather (queued now unless it was) waited for and put in.
  absl::Status Install(int k, bool exact = false) {
    Unit& unit = units_[k];
    if (unit.whole) return absl::OkStatus();
    Prefetch(k, exact);
    if (unit.whole) return absl::OkStatus();
    const absl::Status status = unit.gather->get();
    unit.gather.reset();
    if (!status.ok()) return status;
    for (size_t j = 0; j < unit.params.size(); ++j) {
      Tensor<AD>& p = *params_[unit.params[j]];
      p = p.with_value((*unit.arriving)[j]);
    }
    unit.arriving.reset();
    unit.whole = true;
    return absl::OkStatus();
  }

  // Unit k's parameters back to placeholders (a queued gather still lands, and is dropped).
  void Release(int k) {
    Unit& unit = units_[k];
    DropGather(unit);
    if (!unit.whole) return;
    for (int i : unit.params) {
      Tensor<AD>& p = *params_[i];
      p = p.with_value(Placeholder(p));
    }
    unit.whole = false;
  }
  // Waits for a queued gather of the unit and drops what it brings.
  static void DropGather(Unit& unit) {
    if (!unit.gather) return;
    unit.gather->wait();
    unit.gather.reset();
    unit.arriving.reset();
  }
  void ReleaseAll() {
    for (int k = 0; k < static_cast<int>(units_.size()); ++k) Release(k);
  }

  // A tensor of p's shape and dtype holding one element: NaN, so a forward that reads a freed
  // parameter gives NaN rather than plausible numbers.
  static Tensor<B> Placeholder(const Tensor<AD>& p) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return Tensor<B>::full(Shape{}, nan, p.dtype(), p.device()).expand(p.shape());
  }

  DeviceGroup<B>& group_;
  const int member_;
  GradientSync<B>& sync_;
  const ParameterShardingOptions options_;
  std::vector<Tensor<AD>*> params_;
  std::vector<Tensor<B>> chunks_;
  std::vector<Unit> units_;  // the units in registration order, then the root
  bool gathered_all_ = false;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_SHARDED_PARAMETERS_H_
