// Before a run trains: rank 0 takes the checkpoint folder's lock (one run per folder), chooses
// the checkpoint to resume from and the run identity to write under, and every rank gets that
// choice. --resume=latest takes the newest sound checkpoint of the run that last held the
// folder (the lock's record), or, in a folder without a record, the newest sound one written
// with this run's settings; it says which newer ones it skipped and why (damaged, another
// run's); with none it starts afresh as a new run.
#ifndef KILN_EXAMPLES_CHECKPOINT_PLAN_H_
#define KILN_EXAMPLES_CHECKPOINT_PLAN_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "distributed/process/process_group.h"
#include "distributed/process/settings_agreement.h"
#include "examples/checkpoint_flags.h"
#include "nn/checkpoint_lock.h"
#include "nn/shard_index.h"
#include "nn/training_checkpoint.h"

namespace kiln {

// A checkpoint rank 0 read and verified: the whole form, or the sharded form's index
// (sharded_checkpoint.h).
struct ChosenCheckpoint {
  std::optional<nn::TrainingCheckpoint> checkpoint;
  std::optional<nn::ShardIndex> sharded;
  const std::map<std::string, std::string>& metadata() const {
    return checkpoint ? checkpoint->state.metadata : sharded->plan.metadata;
  }
};
// The checkpoint folder at `path` in either form, read and verified (an error naming the file).
absl::StatusOr<ChosenCheckpoint> ReadChosenCheckpoint(const std::string& path);

struct CheckpointPlan {
  std::unique_ptr<nn::CheckpointDirLock> lock;       // rank 0's, with --checkpoint_dir
  std::string resume_path;                           // "": a fresh start
  std::string run;                                   // what this run writes as
  std::optional<nn::TrainingCheckpoint> checkpoint;  // rank 0's read (and verified) resume_path,
  std::optional<nn::ShardIndex> sharded;             // or its index when it is sharded
  distributed::ProcessGroup* group = nullptr;        // every rank's (null: one process)
};

// One collective over `group` (null: one process). Throws UsageError (a busy or unwritable
// folder, a --resume folder that cannot be read) or RunFailure; `program` prefixes notes.
// `settings`: what changes the math (as recorded in checkpoints).
CheckpointPlan PlanCheckpoints(const CheckpointFlags& flags, const distributed::Settings& settings,
                               distributed::ProcessGroup* group, const char* program);

// The newest sound checkpoint in `dir` of `run` (any run's when `run` is empty, then one
// written with `settings`), in either form, read and verified; a line on stderr for each newer
// one skipped (damaged, incomplete, another run's). nullopt when there is none.
std::optional<std::pair<std::string, ChosenCheckpoint>> LatestOfRun(const std::string& dir, const std::string& run,
                                                                    const distributed::Settings& settings,
                                                                    const char* program);

}  // namespace kiln

#endif  // KILN_EXAMPLES_CHECKPOINT_PLAN_H_
