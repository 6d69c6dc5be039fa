// The sharded form of the examples' training checkpoints (docs/sharded_checkpoints.md), for
// runs with --shard other than none: each process writes its own members' chunks, rank 0 the
// index, whose metadata is the training state's (position, random streams, optimizer name and
// steps, the run) sealed with a CRC-32C of its own. The files go to a temporary folder that
// becomes step-N once the index is in it, so a step-N folder is complete in either form, and
// pruning, --resume=latest and ownership treat both forms alike. The checks and the agreement
// here are plain functions; RunCheckpoints (run_checkpoints.h) moves the tensors.
#ifndef KILN_EXAMPLES_SHARDED_CHECKPOINT_H_
#define KILN_EXAMPLES_SHARDED_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "distributed/process/process_group.h"
#include "nn/shard_index.h"
#include "nn/shard_writer.h"
#include "nn/training_checkpoint.h"

namespace kiln {

// Whether the folder at `path` is in the sharded form: no training_state.safetensors, and an
// index or a shard file.
bool IsShardedCheckpoint(const std::string& path);

// Adds the metadata's checksum (nn::kChecksumKey) over every other key and value.
void SealMetadata(std::map<std::string, std::string>& metadata);

// The index of the sharded checkpoint at `path`, its metadata matching its checksum and naming
// its run: an error naming the file otherwise (DataLoss when changed).
absl::StatusOr<nn::ShardIndex> ReadShardedCheckpointIndex(const std::string& path);

// The same, and every shard file there with the size and CRC-32C the index records (each read
// once, in blocks): rank 0's check of a checkpoint before any rank resumes from it. NotFound
// for a missing file, DataLoss for a changed one, naming it.
absl::StatusOr<nn::ShardIndex> VerifyShardedCheckpoint(const std::string& path);

// The model's parameters as DataParallel::ParameterLayout lists them.
using ParameterLayout = std::vector<std::tuple<std::string, Shape, DType>>;

// Whether the checkpoint covers the model and its optimizer: its optimizer is `optimizer`; every
// parameter is there with its shape and dtype; every other tensor is one of `slots` of a
// parameter, with its shape; each parameter has all slots, or none and is listed as never
// stepped. NotFound or InvalidArgument naming `path` and the first problem.
absl::Status CheckShardedFits(const nn::ShardIndex& index, const std::string& path, const ParameterLayout& params,
                              const std::string& optimizer, const std::vector<std::string>& slots);

// The whole form of the sharded checkpoint at `path` (every chunk read is verified): what an
// unsharded run resumes from, as if an unsharded run had written it.
absl::StatusOr<nn::TrainingCheckpoint> ReadWholeCheckpoint(const std::string& path, const nn::ShardIndex& index);

// One outcome on every rank (one all-reduce; `group` null: one process): OK when every rank's
// `mine` is; otherwise a failing rank keeps its own error and the others get the first failing
// rank's code with a message naming it and `what`.
absl::Status AgreeOnRanks(distributed::ProcessGroup* group, const absl::Status& mine, absl::string_view what);

// Writes the step-`step` checkpoint of `run` in `dir` (every rank calls it at once): rank 0
// makes a temporary folder, each rank writes its members' files (`local`), and once every rank
// has, rank 0 writes the index, renames the folder to step-<step> (nn::PlaceTrainingCheckpoint)
// and prunes `run`'s checkpoints to the newest `keep`. The same status on every rank; on error
// no step folder changes.
absl::Status WriteShardedCheckpoint(distributed::ProcessGroup* group, const std::string& dir, int64_t step, int keep,
                                    const std::string& run, const nn::ShardPlan& plan,
                                    const std::map<int64_t, nn::MemberChunks>& local);

}  // namespace kiln

#endif  // KILN_EXAMPLES_SHARDED_CHECKPOINT_H_
