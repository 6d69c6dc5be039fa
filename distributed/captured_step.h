// CapturedStep: a DataParallel<Cuda> training step recorded as a CUDA graph once per batch
// shape and replayed afterwards, so that a step costs the host a few runtime calls instead of a
// launch per op (for small models the host, not the GPU, sets the pace of an eager step).
// Opt-in and CUDA-only: its own target, which CPU and Vulkan builds never compile or link.
//
// The first step of each (x, y) shape and dtype runs eagerly, as DataParallel::Step (a warm-up:
// the allocator's cache, cuBLAS and the optimizer's state then look as they will in every
// later step), and then that step is captured, not run. Later steps of that shape copy x and
// y into the buffers the graph reads, launch it and read the loss the graph left in pinned
// memory (one wait per step, as eager Step has).
//
// What a replay repeats is the captured step exactly, so the captured step may not depend on
// anything the host changes between steps:
//  - one device, one process: collectives are refused (each NCCL call is met, agreed across
//    processes and watched from the host, which a replay would skip; capturing the NCCL
//    kernels with that agreement made once at capture is the next step, not done);
//  - a replayable optimizer (SGD; AdamW's bias correction uses the step count) at the
//    learning rate the graph was captured with: a changed rate recaptures on the next step;
//  - no random streams in the model (dropout's masks would repeat), no gradient clipping (it
//    reads the norm back), and no op that waits for the device (integer division, index and
//    cross-entropy target checks, item, to_data): those are refused with the op's name.
// The step's state (parameters, optimizer slots) lives in buffers the graphs read and write
// in place: every shape's graph shares them, and CapturedStep puts them back into the model
// and optimizer (copying in whatever an eager step or a checkpoint load put there instead)
// before each replay. Values of the parameters read after a captured step change with the
// next replay; copy them to keep them.
#ifndef KILN_DISTRIBUTED_CAPTURED_STEP_H_
#define KILN_DISTRIBUTED_CAPTURED_STEP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/cuda/allocator.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/graph.h"
#include "distributed/data_parallel.h"

namespace kiln::distributed {

class CapturedStep {
 public:
  using DP = DataParallel<Cuda>;

  // Refuses (FailedPrecondition, saying why) what can be told up front: a group of more than
  // one device or process, a non-replayable optimizer, random streams. `dp` outlives this.
  static absl::StatusOr<std::unique_ptr<CapturedStep>> Create(DP& dp, DP::LossFn loss);
  ~CapturedStep();
  CapturedStep(const CapturedStep&) = delete;
  CapturedStep& operator=(const CapturedStep&) = delete;

  // One step on (x, y); returns the batch's mean loss, as DataParallel::Step.
  absl::StatusOr<double> Step(const Tensor<Cuda>& x, const Tensor<Cuda>& y);

  struct Stats {
    int64_t eager_steps = 0;  // warm-ups (one per shape, and per learning-rate change)
    int64_t captures = 0;
    int64_t replays = 0;
  };
  const Stats& stats() const { return stats_; }
  int graphs() const { return static_cast<int>(graphs_.size()); }
  // For tests: the buffer the graph of x's shape reads x from (null when none is captured).
  const Tensor<Cuda>* input_buffer(const Shape& x_shape) const;
  const cuda::CapturedGraph* graph(const Shape& x_shape) const;

 private:
  struct Graph {
    Shape x_shape, y_shape;
    DType x_dtype, y_dtype;
    double lr;
    std::optional<Tensor<Cuda>> x, y;    // what the graph reads the batch from
    cuda::CachingAllocator::Block loss;  // pinned: the f64 loss the graph writes
    std::unique_ptr<cuda::CapturedGraph> graph;
  };

  CapturedStep(DP& dp, DP::LossFn loss);
  Graph* Find(const Tensor<Cuda>& x, const Tensor<Cuda>& y);
  absl::Status CheckStep() const;
  absl::Status Capture(const Tensor<Cuda>& x, const Tensor<Cuda>& y);
  // State buffers that match the optimizer's slots, made anew (the graphs dropped) if need be.
  absl::Status PrepareStateBuffers();
  // A graph for (x, y)'s shapes, not yet captured: its own copy of the batch, its pinned loss.
  absl::StatusOr<std::unique_ptr<Graph>> NewGraph(const Tensor<Cuda>& x, const Tensor<Cuda>& y) const;
  // What the graph runs: member r's step on g's batch, then the new parameters, slots and
  // loss written where the next replay reads them.
  absl::Status RecordStep(int r, const Graph& g);
  // After a capture, which ran nothing: the model and optimizer back on the state buffers,
  // the optimizer at `steps`.
  void RestoreState(int64_t steps);
  absl::StatusOr<double> Replay(Graph& g, const Tensor<Cuda>& x, const Tensor<Cuda>& y);
  // Puts the state buffers back into the model and optimizer, copying in other values found
  // there. false when the optimizer's slots no longer match the buffers' (a load_state):
  // then the graphs are dropped.
  bool UseStateBuffers();
  void MakeStateBuffers();
  void DropGraphs();

  DP& dp_;
  const DP::LossFn loss_;
  const CudaDevice device_;
  std::vector<Tensor<Autodiff<Cuda>>*> params_;  // replica 0's
  std::vector<Tensor<Cuda>> param_state_;        // the buffers graphs read and write
  std::vector<std::string> slot_names_;          // the optimizer's state keys, in order
  std::vector<Tensor<Cuda>> slot_state_;
  std::vector<std::unique_ptr<Graph>> graphs_;
  Stats stats_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_CAPTURED_STEP_H_
