#include "distributed/captured_step.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/cuda/context.h"
#include "backends/cuda/launch.h"

namespace kiln::distributed {
namespace {

using AD = Autodiff<Cuda>;

// A row-major copy in a buffer of its own: what the graphs may write in place.
Tensor<Cuda> OwnCopy(const Tensor<Cuda>& t) { return Tensor<Cuda>(cuda::CopyAs(t.primitive(), t.dtype())); }

std::string Describe(const Tensor<Cuda>& x, const Tensor<Cuda>& y) {
  return absl::StrCat("x ", DTypeName(x.dtype()), x.shape().ToString(), ", y ", DTypeName(y.dtype()),
                      y.shape().ToString());
}

}  // namespace

absl::StatusOr<std::unique_ptr<CapturedStep>> CapturedStep::Create(DP& dp, DP::LossFn loss) {
  const auto& group = dp.group();
  if (group.processes() > 1 || group.global_size() != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CapturedStep: a group of ", group.global_size(), " devices over ", group.processes(),
        " process(es) is not captured: each NCCL collective is met, agreed across processes and watched from "
        "the host, which a graph replay would skip; capture a one-device step, or run DataParallel::Step"));
  }
  if (dp.sharding() != Sharding::kNone) {
    return absl::FailedPreconditionError(absl::StrCat("CapturedStep: sharding '", ShardingName(dp.sharding()),
                                                      "' is not captured: its shards are cut and gathered on the "
                                                      "host's schedule; capture an unsharded step"));
  }
  if (!dp.optimizer(0).replayable()) {
    return absl::FailedPreconditionError(absl::StrCat("CapturedStep: optimizer ", dp.optimizer(0).name(),
                                                      " is not replayable (its update depends on the step count, "
                                                      "which a graph replay cannot advance); use SGD"));
  }
  if (!dp.replica(0).named_generators().empty()) {
    return absl::FailedPreconditionError(
        "CapturedStep: the model has random streams (dropout): their state advances on the host, so every replay "
        "would repeat the captured masks");
  }
  return std::unique_ptr<CapturedStep>(new CapturedStep(dp, std::move(loss)));
}

CapturedStep::CapturedStep(DP& dp, DP::LossFn loss)
    : dp_(dp), loss_(std::move(loss)), device_(dp.group().devices()[0]) {
  for (auto& [name, p] : dp_.replica(0).named_parameters()) params_.push_back(p);
}

CapturedStep::~CapturedStep() { DropGraphs(); }

void CapturedStep::DropGraphs() {
  for (auto& g : graphs_) {
    // Every replay was waited for (Step reads its loss), so nothing writes the pinned slot.
    cuda::PinnedMemory().Free(g->loss);
  }
  graphs_.clear();
}

const Tensor<Cuda>* CapturedStep::input_buffer(const Shape& x_shape) const {
  for (const auto& g : graphs_) {
    if (g->x_shape == x_shape) return &*g->x;
  }
  return nullptr;
}

const cuda::CapturedGraph* CapturedStep::graph(const Shape& x_shape) const {
  for (const auto& g : graphs_) {
    if (g->x_shape == x_shape) return g->graph.get();
  }
  return nullptr;
}

CapturedStep::Graph* CapturedStep::Find(const Tensor<Cuda>& x, const Tensor<Cuda>& y) {
  for (auto& g : graphs_) {
    if (g->x_shape == x.shape() && g->y_shape == y.shape() && g->x_dtype == x.dtype() && g->y_dtype == y.dtype()) {
      return g.get();
    }
  }
  return nullptr;
}

absl::Status CapturedStep::CheckStep() const {
  if (dp_.clip_grad_norm() > 0) {
    return absl::FailedPreconditionError(
        "CapturedStep: gradient clipping reads the gradients' norm back to the host every step, which a graph "
        "cannot hold; set_clip_grad_norm(0) or run DataParallel::Step");
  }
  if (dp_.loss_scaler() != nullptr) {
    return absl::FailedPreconditionError(
        "CapturedStep: loss scaling reads the overflow check back to the host every step, which a graph cannot "
        "hold; set_loss_scaler(std::nullopt) or run DataParallel::Step");
  }
  return absl::OkStatus();
}

absl::StatusOr<double> CapturedStep::Step(const Tensor<Cuda>& x, const Tensor<Cuda>& y) {
  if (absl::Status s = CheckStep(); !s.ok()) return s;
  if (absl::Status s = dp_.CheckBatch(x, y); !s.ok()) return s;
  Graph* g = Find(x, y);
  if (g != nullptr && g->lr != dp_.optimizer(0).lr()) {
    // The rate is a kernel argument inside the graph: recapture at the new one.
    std::erase_if(graphs_, [&](const std::unique_ptr<Graph>& other) {
      if (other.get() != g) return false;
      cuda::PinnedMemory().Free(other->loss);
      return true;
    });
    g = nullptr;
  }
  if (g != nullptr) return Replay(*g, x, y);
  absl::StatusOr<double> loss = dp_.Step(x, y, loss_);  // the warm-up, eager
  ++stats_.eager_steps;
  if (!loss.ok()) return loss;
  if (absl::Status s = Capture(x, y); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("CapturedStep: capturing the step of ", Describe(x, y),
                                               " (this call's step ran eagerly): ", s.message()));
  }
  ++stats_.captures;
  return loss;
}

void CapturedStep::MakeStateBuffers() {
  param_state_.clear();
  slot_names_.clear();
  slot_state_.clear();
  for (Tensor<AD>* p : params_) param_state_.push_back(OwnCopy(p->inner()));
  for (const auto& [name, value] : dp_.optimizer(0).state()) {
    slot_names_.push_back(name);
    slot_state_.push_back(OwnCopy(value));
  }
}

bool CapturedStep::UseStateBuffers() {
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor<Cuda> value = params_[i]->inner();
    if (value.primitive().buffer == param_state_[i].primitive().buffer) continue;
    cuda::WriteInto(value.primitive(), param_state_[i].primitive());
    *params_[i] = params_[i]->with_value(param_state_[i]);
  }
  nn::Optimizer<Cuda>& opt = dp_.optimizer(0);
  const auto& state = opt.state();
  if (state.size() != slot_names_.size()) return false;
  bool same = true;
  size_t i = 0;
  for (const auto& [name, value] : state) {
    if (name != slot_names_[i]) return false;
    same = same && value.primitive().buffer == slot_state_[i].primitive().buffer;
    ++i;
  }
  if (same) return true;
  nn::Optimizer<Cuda>::State buffers;
  i = 0;
  for (const auto& [name, value] : state) {
    cuda::WriteInto(value.primitive(), slot_state_[i].primitive());
    buffers.emplace(name, slot_state_[i]);
    ++i;
  }
  opt.load_state(std::move(buffers), opt.steps());
  return true;
}

absl::Status CapturedStep::Capture(const Tensor<Cuda>& x, const Tensor<Cuda>& y) {
  if (absl::Status s = PrepareStateBuffers(); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Graph>> made = NewGraph(x, y);
  if (!made.ok()) return made.status();
  std::unique_ptr<Graph> g = *std::move(made);
  const int64_t steps = dp_.optimizer(0).steps();
  const absl::Status status = dp_.RunOnMembers([&](int r) -> absl::Status {
    absl::StatusOr<std::unique_ptr<cuda::CapturedGraph>> graph =
        cuda::CapturedGraph::Capture(device_, [&]() { return RecordStep(r, *g); });
    if (!graph.ok()) return graph.status();
    g->graph = *std::move(graph);
    return absl::OkStatus();
  });
  RestoreState(steps);
  if (!status.ok()) {
    cuda::PinnedMemory().Free(g->loss);
    return status;
  }
  graphs_.push_back(std::move(g));
  return absl::OkStatus();
}

absl::Status CapturedStep::PrepareStateBuffers() {
  try {
    if (param_state_.empty() || !UseStateBuffers()) {
      DropGraphs();  // the optimizer's slots changed: the graphs write buffers nobody reads
      MakeStateBuffers();
      if (!UseStateBuffers()) return absl::InternalError("CapturedStep: the state buffers do not match");
    }
  } catch (const Error& e) {
    return e.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CapturedStep::Graph>> CapturedStep::NewGraph(const Tensor<Cuda>& x,
                                                                            const Tensor<Cuda>& y) const {
  auto g = std::make_unique<Graph>();
  g->x_shape = x.shape();
  g->y_shape = y.shape();
  g->x_dtype = x.dtype();
  g->y_dtype = y.dtype();
  g->lr = dp_.optimizer(0).lr();
  absl::StatusOr<cuda::CachingAllocator::Block> pinned = cuda::PinnedMemory().Allocate(sizeof(double));
  if (!pinned.ok()) return pinned.status();
  g->loss = *pinned;
  try {
    g->x = OwnCopy(x.to(device_));
    g->y = OwnCopy(y.to(device_));
  } catch (const Error& e) {
    cuda::PinnedMemory().Free(g->loss);
    return e.status();
  }
  return g;
}

absl::Status CapturedStep::RecordStep(int r, const Graph& g) {
  absl::StatusOr<Tensor<Cuda>> share = dp_.MemberStep(r, *g.x, *g.y, loss_);
  if (!share.ok()) return share.status();
  // The step gave every parameter and slot a new tensor (from the graph's pool); the
  // graph ends by writing them into the state buffers, where the next replay reads.
  for (size_t i = 0; i < params_.size(); ++i) {
    cuda::WriteInto(params_[i]->inner().primitive(), param_state_[i].primitive());
  }
  size_t i = 0;
  for (const auto& [name, value] : dp_.optimizer(0).state()) {
    if (i >= slot_names_.size() || name != slot_names_[i]) {
      return absl::FailedPreconditionError(
          absl::StrCat("the optimizer's state changed during the captured step (", name,
                       "); a step that repeats exactly is needed, as after the warm-up"));
    }
    cuda::WriteInto(value.primitive(), slot_state_[i].primitive());
    ++i;
  }
  cuda::CopyToPinnedHost(Cuda::contiguous(share->primitive()), g.loss.ptr);
  return absl::OkStatus();
}

// The capture ran nothing: the model and optimizer go back to the state buffers, which hold
// the warm-up's results, and the step the capture counted is taken back.
void CapturedStep::RestoreState(int64_t steps) {
  for (size_t i = 0; i < params_.size(); ++i) *params_[i] = params_[i]->with_value(param_state_[i]);
  nn::Optimizer<Cuda>::State buffers;
  for (size_t i = 0; i < slot_names_.size(); ++i) buffers.emplace(slot_names_[i], slot_state_[i]);
  dp_.optimizer(0).load_state(std::move(buffers), steps);
}

absl::StatusOr<double> CapturedStep::Replay(Graph& g, const Tensor<Cuda>& x, const Tensor<Cuda>& y) {
  try {
    if (!UseStateBuffers()) {
      DropGraphs();  // a load_state with other slots: warm up and capture again
      return Step(x, y);
    }
    cuda::WriteInto(x.primitive(), g.x->primitive());
    cuda::WriteInto(y.primitive(), g.y->primitive());
    if (absl::Status s = g.graph->Launch(); !s.ok()) return s;
    cuda::Synchronize(device_);
  } catch (const Error& e) {
    return e.status();
  }
  dp_.optimizer(0).CountReplayedStep();
  ++stats_.replays;
  return *static_cast<const double*>(g.loss.ptr);
}

}  // namespace kiln::distributed
