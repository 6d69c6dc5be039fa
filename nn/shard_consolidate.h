// From a sharded checkpoint to one model.safetensors: the model's parameters alone, whole,
// under their module paths, as the unsharded training checkpoints write it (metadata
// "format": "pt"), so that PyTorch's load_state_dict(strict=True) takes it.
#ifndef KILN_NN_SHARD_CONSOLIDATE_H_
#define KILN_NN_SHARD_CONSOLIDATE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace kiln::nn {

struct ConsolidatedModel {
  int64_t world = 0;     // the checkpoint's members
  std::string stage;     // and its stage, as its index records them
  int64_t tensors = 0;   // parameters written
  int64_t elements = 0;  // their elements
  uint64_t bytes = 0;    // the file's size
};

// Reads the parameters of the sharded checkpoint in `dir` (ReadShard with world 1: every
// chunk read is verified) and writes them to `out`, atomically; `out` must not exist
// (AlreadyExists: nothing is overwritten). `progress(name, done, total)` after each parameter.
absl::StatusOr<ConsolidatedModel> ConsolidateShardedCheckpoint(
    const std::string& dir, const std::string& out,
    const std::function<void(const std::string& name, int64_t done, int64_t total)>& progress = nullptr);

}  // namespace kiln::nn

#endif  // KILN_NN_SHARD_CONSOLIDATE_H_
