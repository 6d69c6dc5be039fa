// Training checkpoints for resuming a run exactly: one directory per checkpoint,
// <dir>/step-<12 digits>, holding
//   model.safetensors           the parameters only, under their plain paths: what PyTorch's
//                               load_state_dict(strict=True) takes;
//   training_state.safetensors  the optimizer's state ("optimizer/<slot>/<path>") and, in its
//                               metadata, everything else the caller needs (step, data
//                               position, random streams, settings).
// A checkpoint is written into a temporary directory beside the others, both files flushed,
// then renamed into place: a directory named step-N is always complete, so "the newest
// checkpoint" is always one that can be loaded.
#ifndef KILN_NN_TRAINING_CHECKPOINT_H_
#define KILN_NN_TRAINING_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nn/checkpoint.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/safetensors.h"

namespace kiln::nn {

// Host copies of everything a checkpoint holds: taking one is the only part of writing a
// checkpoint that has to stop training.
struct TrainingCheckpoint {
  TensorFile model;
  TensorFile state;
};

inline constexpr char kTrainingStateFormat[] = "kiln-training-state/1";
inline constexpr char kStreamPrefix[] = "stream/";  // metadata "stream/<path>": a generator's state

// The states of `streams` (Module::named_generators) in `metadata`: InvalidArgument naming
// `path` and the first stream that is missing or not a whole number.
absl::StatusOr<std::vector<uint64_t>> StreamStates(const std::map<std::string, std::string>& metadata,
                                                   const std::vector<std::pair<std::string, Generator*>>& streams,
                                                   const std::string& path);

template <Backend B>
TrainingCheckpoint SnapshotTraining(Module<Autodiff<B>>& module, const Optimizer<B>& optimizer,
                                    std::map<std::string, std::string> metadata) {
  TrainingCheckpoint c;
  for (auto& [name, p] : module.named_parameters()) c.model.tensors.emplace(name, p->to_data());
  c.model.metadata["format"] = "pt";  // as PyTorch's own safetensors files say
  c.state.metadata = std::move(metadata);
  c.state.metadata["format"] = kTrainingStateFormat;
  c.state.metadata["optimizer"] = optimizer.name();
  c.state.metadata["optimizer.steps"] = absl::StrCat(optimizer.steps());
  for (auto& [name, g] : module.named_generators()) c.state.metadata[kStreamPrefix + name] = absl::StrCat(g->state());
  for (const auto& [key, t] : optimizer.state()) c.state.tensors.emplace(kOptimizerPrefix + key, t.to_data());
  return c;
}

// "<dir>/step-000000000042".
std::string TrainingCheckpointPath(const std::string& dir, int64_t step);

// Writes `checkpoint` as <dir>/step-<step> (creating `dir` if its parent exists), replacing
// one of that step already there. On failure nothing named step-<step> changes.
absl::Status WriteTrainingCheckpoint(const std::string& dir, int64_t step, const TrainingCheckpoint& checkpoint);

// Whether checkpoints can be written in `dir`, creating it if its parent exists: an error
// naming the problem, for a program to report before it trains.
absl::Status CheckCheckpointDir(const std::string& dir);

// Removes all but the newest `keep` checkpoints in `dir`, and what interrupted writes left.
absl::Status PruneTrainingCheckpoints(const std::string& dir, int keep);

// The newest complete checkpoint in `dir`; NotFound naming `dir` when it has none.
absl::StatusOr<std::string> LatestTrainingCheckpoint(const std::string& dir);

// Reads both files of the checkpoint directory at `path`. A missing file, a damaged one, or a
// training state of another format is an error naming the file.
absl::StatusOr<TrainingCheckpoint> ReadTrainingCheckpoint(const std::string& path);

// Sets the module's parameters, random streams and the optimizer's state from `checkpoint`
// (read from `path`, which errors name); nothing changes unless all of it fits
// (LoadCheckpointFrom). A parameter or optimizer state of another dtype than the model's is an
// error unless options.convert_dtype (LoadOptions) asks for it to be converted.
template <Backend B>
absl::Status RestoreTraining(const TrainingCheckpoint& checkpoint, const std::string& path, Module<Autodiff<B>>& module,
                             Optimizer<B>& optimizer, const LoadOptions& options = {}) {
  TensorFile merged = checkpoint.model;
  merged.metadata = checkpoint.state.metadata;
  for (const auto& [name, t] : checkpoint.state.tensors) {
    if (name.rfind(kOptimizerPrefix, 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, "/training_state.safetensors has tensor ", name, ", which is no optimizer state"));
    }
    merged.tensors.emplace(name, t);
  }
  const auto streams = module.named_generators();
  auto states = StreamStates(checkpoint.state.metadata, streams, path);
  if (!states.ok()) return states.status();
  if (absl::Status s = LoadCheckpointFrom(merged, path, module, &optimizer, options); !s.ok()) return s;
  for (size_t i = 0; i < streams.size(); ++i) *streams[i].second = Generator((*states)[i]);
  return absl::OkStatus();
}

}  // namespace kiln::nn

#endif  // KILN_NN_TRAINING_CHECKPOINT_H_
