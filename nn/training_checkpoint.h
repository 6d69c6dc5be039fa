// Training checkpoints for resuming a run exactly: one directory per checkpoint,
// <dir>/step-<12 digits>, holding
//   model.safetensors           the parameters only, under their plain paths: what PyTorch's
//                               load_state_dict(strict=True) takes;
//   training_state.safetensors  the optimizer's state ("optimizer/<slot>/<path>") and, in its
//                               metadata, everything else the caller needs (step, data
//                               position, random streams, settings), the run that wrote it
//                               ("run") and a CRC-32C of both files' contents ("crc32c").
// A checkpoint is written into a temporary directory beside the others, both files flushed,
// then renamed into place: a directory named step-N is always complete. A run owns what it
// writes: pruning removes only its own older checkpoints, and a step-N of another run is
// moved aside (step-N.kept-XXXXXX), never replaced. Reading verifies the checksum, so a
// flipped bit is found on resume rather than trained on.
#ifndef KILN_NN_TRAINING_CHECKPOINT_H_
#define KILN_NN_TRAINING_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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

inline constexpr char kTrainingStateFormat[] = "kiln-training-state/2";
inline constexpr char kStreamPrefix[] = "stream/";  // metadata "stream/<path>": a generator's state
inline constexpr char kRunKey[] = "run";            // metadata: the run that wrote it (NewRunId)
inline constexpr char kChecksumKey[] = "crc32c";    // metadata: ChecksumOf both files, 8 hex digits
// Metadata: the parameters that had no optimizer state when the checkpoint was taken (never
// stepped), comma-separated; every other parameter must have all of the optimizer's slots.
inline constexpr char kStatelessKey[] = "optimizer.stateless";

// A fresh run identity: 16 hex digits from the system's random source.
std::string NewRunId();

// The CRC-32C of everything in both files but the checksum itself: metadata (sorted) and each
// tensor's name, dtype, shape and bytes.
uint32_t ChecksumOf(const TrainingCheckpoint& checkpoint);

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
  std::vector<std::string> stateless;
  for (auto& [name, p] : module.named_parameters()) {
    bool has = false;
    for (const std::string& slot : optimizer.slots()) has = has || optimizer.state().contains(slot + "/" + name);
    if (!has) stateless.push_back(name);
  }
  c.state.metadata[kStatelessKey] = absl::StrJoin(stateless, ",");
  for (const auto& [key, t] : optimizer.state()) c.state.tensors.emplace(kOptimizerPrefix + key, t.to_data());
  return c;
}

// Every parameter of `module` has all of `optimizer`'s slots in `checkpoint` but those the
// writer listed as stateless, which have none: a training state cut short or edited would
// otherwise resume with its moments silently reset. InvalidArgument naming the parameter.
template <Backend B>
absl::Status CheckOptimizerSlots(const TrainingCheckpoint& checkpoint, const std::string& path,
                                 Module<Autodiff<B>>& module, const Optimizer<B>& optimizer) {
  const auto listed = checkpoint.state.metadata.find(kStatelessKey);
  if (listed == checkpoint.state.metadata.end()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the training state has no ", kStatelessKey));
  }
  const std::vector<std::string> slots = optimizer.slots();
  if (slots.empty()) return absl::OkStatus();
  std::set<std::string> stateless;
  for (absl::string_view name : absl::StrSplit(listed->second, ',', absl::SkipEmpty())) stateless.emplace(name);
  for (auto& [name, p] : module.named_parameters()) {
    const bool has = checkpoint.state.tensors.contains(absl::StrCat(kOptimizerPrefix, slots[0], "/", name));
    if (!has && !stateless.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": the training state has no optimizer state for parameter ", name, " (", optimizer.name(),
                       " keeps ", absl::StrJoin(slots, ", "), "), and its writer did not list it as never stepped"));
    }
    if (has && stateless.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": parameter ", name, " has optimizer state but is listed as never stepped"));
    }
  }
  return absl::OkStatus();
}

// "<dir>/step-000000000042".
std::string TrainingCheckpointPath(const std::string& dir, int64_t step);

// Writes `checkpoint` (whose state metadata names its run) as <dir>/step-<step>, creating
// `dir` if its parent exists, with its checksum. A step-<step> already there is replaced if
// the same run wrote it; otherwise it is moved aside to step-<step>.kept-XXXXXX, with a note
// on stderr. On failure nothing named step-<step> changes.
absl::Status WriteTrainingCheckpoint(const std::string& dir, int64_t step, TrainingCheckpoint checkpoint);

// The two halves of writing a checkpoint folder, for writers of other forms (a sharded
// checkpoint, whose files several processes write): a fresh temporary folder in `dir` for
// step `step`, which pruning removes as a leftover unless it is placed; and placing the
// complete folder `temp` as <dir>/step-<step> of `run`, as WriteTrainingCheckpoint does (a
// step-<step> of `run` replaced, another run's moved aside; `temp` removed on failure).
absl::StatusOr<std::string> NewCheckpointFolder(const std::string& dir, int64_t step);
absl::Status PlaceTrainingCheckpoint(const std::string& dir, int64_t step, const std::string& temp,
                                     const std::string& run);

// Whether checkpoints can be written in `dir`, creating it if its parent exists: an error
// naming the problem, for a program to report before it trains.
absl::Status CheckCheckpointDir(const std::string& dir);

struct CheckpointEntry {
  int64_t step;
  std::string path;
};
// The step-N folders in `dir` (directories, not links), oldest first; NotFound naming `dir`
// when it cannot be read.
absl::StatusOr<std::vector<CheckpointEntry>> ListTrainingCheckpoints(const std::string& dir);

// The run that wrote the checkpoint at `path`, from its training state's header alone (or, in
// a sharded checkpoint, from its index.json); an error naming the file when it is no kiln
// training state (NotFound for a folder with neither file: an interrupted sharded write).
absl::StatusOr<std::string> TrainingCheckpointRun(const std::string& path);

// Removes `run`'s checkpoints in `dir` but its newest `keep` (at least one), and what
// interrupted writes left (.writing-step-*: only a run holding the folder's lock may call
// this, so none of them is in progress). Checkpoints of other runs and folders that are no
// readable checkpoint are never touched. An error names the first folder it could not remove.
absl::Status PruneTrainingCheckpoints(const std::string& dir, int keep, const std::string& run);

// Reads both files of the checkpoint directory at `path` and verifies them. A missing file, a
// damaged one (DataLoss when the checksum differs), or a training state of another format is
// an error naming the file.
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
  if (absl::Status s = CheckOptimizerSlots(checkpoint, path, module, optimizer); !s.ok()) return s;
  if (absl::Status s = LoadCheckpointFrom(merged, path, module, &optimizer, options); !s.ok()) return s;
  for (size_t i = 0; i < streams.size(); ++i) *streams[i].second = Generator((*states)[i]);
  return absl::OkStatus();
}

}  // namespace kiln::nn

#endif  // KILN_NN_TRAINING_CHECKPOINT_H_
