#include "examples/checkpoint_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, checkpoint_dir, "",
          "folder for training checkpoints (step-N folders: model and training state) to resume from");
ABSL_FLAG(int64_t, checkpoint_every, 0, "steps between training checkpoints (0: only the program's own ones)");
ABSL_FLAG(int, keep_checkpoints, 3,
          "training checkpoints of this run kept in --checkpoint_dir (its newest; other runs' are never removed)");
ABSL_FLAG(std::string, resume, "",
          "a training checkpoint folder to go on from, or latest (the newest sound one of the run that last used "
          "--checkpoint_dir; none: start afresh)");

namespace kiln {
namespace {

absl::Status Bad(const std::string& flag, const std::string& value, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, ": ", why));
}

}  // namespace

absl::StatusOr<CheckpointFlags> CheckpointFlagsFromFlags() {
  CheckpointFlags f;
  f.dir = absl::GetFlag(FLAGS_checkpoint_dir);
  f.every = absl::GetFlag(FLAGS_checkpoint_every);
  if (f.every < 0 || f.every > (int64_t{1} << 40)) {
    return Bad("checkpoint_every", absl::StrCat(f.every), "expected 0..2^40 steps");
  }
  if (f.every > 0 && f.dir.empty()) return Bad("checkpoint_every", absl::StrCat(f.every), "needs --checkpoint_dir");
  f.keep = absl::GetFlag(FLAGS_keep_checkpoints);
  if (f.keep < 1 || f.keep > 1000000) return Bad("keep_checkpoints", absl::StrCat(f.keep), "expected 1..1000000");
  f.resume = absl::GetFlag(FLAGS_resume);
  if (f.resume == "latest" && f.dir.empty()) return Bad("resume", f.resume, "needs --checkpoint_dir");
  return f;
}

distributed::Settings CheckpointAgreement(const CheckpointFlags& flags) {
  return {{"--checkpoint_dir", flags.dir},
          {"--checkpoint_every", absl::StrCat(flags.every)},
          {"--keep_checkpoints", absl::StrCat(flags.keep)},
          {"--resume", flags.resume}};
}

}  // namespace kiln
