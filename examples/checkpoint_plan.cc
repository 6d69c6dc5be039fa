#include "examples/checkpoint_plan.h"

#include <cstdio>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "distributed/process/lead_decision.h"
#include "examples/run_setup.h"
#include "examples/sharded_checkpoint.h"
#include "examples/train_position.h"

namespace kiln {
namespace {

bool IsUsageError(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kFailedPrecondition ||
         code == absl::StatusCode::kNotFound || code == absl::StatusCode::kDataLoss ||
         code == absl::StatusCode::kPermissionDenied;
}

absl::Status Flagged(const std::string& flag, const std::string& value, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat("--", flag, "=", value, ": ", s.message()));
}

}  // namespace

absl::StatusOr<ChosenCheckpoint> ReadChosenCheckpoint(const std::string& path) {
  ChosenCheckpoint chosen;
  if (IsShardedCheckpoint(path)) {
    auto index = VerifyShardedCheckpoint(path);
    if (!index.ok()) return index.status();
    chosen.sharded = *std::move(index);
  } else {
    auto checkpoint = nn::ReadTrainingCheckpoint(path);
    if (!checkpoint.ok()) return checkpoint.status();
    chosen.checkpoint = *std::move(checkpoint);
  }
  return chosen;
}

std::optional<std::pair<std::string, ChosenCheckpoint>> LatestOfRun(const std::string& dir, const std::string& run,
                                                                    const distributed::Settings& settings,
                                                                    const char* program) {
  auto list = nn::ListTrainingCheckpoints(dir);
  if (!list.ok()) return std::nullopt;
  for (auto it = list->rbegin(); it != list->rend(); ++it) {
    std::string why;
    if (auto owner = nn::TrainingCheckpointRun(it->path); !owner.ok()) {
      why = std::string(owner.status().message());
    } else if (!run.empty() && *owner != run) {
      // The name comes from the file: shown escaped and cut.
      why = absl::StrCat("written by run ", absl::CHexEscape(owner->substr(0, 64)), ", not by run ", run,
                         ", which last used this folder");
    } else if (auto checkpoint = ReadChosenCheckpoint(it->path); !checkpoint.ok()) {
      why = std::string(checkpoint.status().message());
    } else if (auto position = ParsePosition(checkpoint->metadata(), settings, it->path);
               run.empty() && !position.ok()) {
      why = std::string(position.status().message());  // a folder without a record: another run's
    } else {
      return std::make_pair(it->path, *std::move(checkpoint));
    }
    std::fprintf(stderr, "%s: --resume=latest: skipping %s: %s\n", program, it->path.c_str(), why.c_str());
  }
  return std::nullopt;
}

CheckpointPlan PlanCheckpoints(const CheckpointFlags& flags, const distributed::Settings& settings,
                               distributed::ProcessGroup* group, const char* program) {
  CheckpointPlan plan;
  const auto decide = [&]() -> absl::StatusOr<std::string> {
    if (!flags.dir.empty()) {
      if (absl::Status s = nn::CheckCheckpointDir(flags.dir); !s.ok()) return Flagged("checkpoint_dir", flags.dir, s);
      auto lock = nn::CheckpointDirLock::Take(flags.dir);
      if (!lock.ok()) return Flagged("checkpoint_dir", flags.dir, lock.status());
      plan.lock = *std::move(lock);
    }
    if (flags.resume == "latest") {
      const std::string previous = plan.lock->previous() ? plan.lock->previous()->run : "";
      if (auto latest = LatestOfRun(flags.dir, previous, settings, program)) {
        plan.resume_path = latest->first;
        plan.checkpoint = std::move(latest->second.checkpoint);
        plan.sharded = std::move(latest->second.sharded);
      } else {
        std::fprintf(stderr, "%s: --resume=latest: no sound checkpoint of %s in %s; starting afresh\n", program,
                     previous.empty() ? "any run" : absl::StrCat("run ", previous).c_str(), flags.dir.c_str());
      }
    } else if (!flags.resume.empty()) {
      auto checkpoint = ReadChosenCheckpoint(flags.resume);
      if (!checkpoint.ok()) return Flagged("resume", flags.resume, checkpoint.status());
      plan.resume_path = flags.resume;
      plan.checkpoint = std::move(checkpoint->checkpoint);
      plan.sharded = std::move(checkpoint->sharded);
    }
    // A resumed run goes on as the run it resumes: its checkpoints are that run's.
    const std::string run = plan.checkpoint ? plan.checkpoint->state.metadata.at(nn::kRunKey)
                            : plan.sharded  ? plan.sharded->plan.metadata.at(nn::kRunKey)
                                            : nn::NewRunId();
    return absl::StrCat(run, "\n", plan.resume_path);
  };
  const absl::StatusOr<std::string> decided = distributed::DecidedByLead(group, decide);
  if (!decided.ok()) {
    if (IsUsageError(decided.status().code())) throw UsageError{std::string(decided.status().message())};
    throw RunFailure{std::string(decided.status().message())};
  }
  const size_t newline = decided->find('\n');
  plan.run = decided->substr(0, newline);
  plan.resume_path = decided->substr(newline + 1);
  plan.group = group;
  if (plan.lock) {
    if (absl::Status s = plan.lock->Record(plan.run); !s.ok()) throw RunFailure{std::string(s.message())};
  }
  return plan;
}

}  // namespace kiln
