// The flags of training checkpoints and resuming, shared by examples/train and examples/gpt:
//   --checkpoint_dir, --checkpoint_every, --keep_checkpoints, --resume (a folder or latest).
#ifndef KILN_EXAMPLES_CHECKPOINT_FLAGS_H_
#define KILN_EXAMPLES_CHECKPOINT_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace kiln {

struct CheckpointFlags {
  std::string dir;     // training checkpoints ("": none)
  int64_t every = 0;   // steps between them; 0: only where the program always writes one
  int keep = 3;        // the newest kept
  std::string resume;  // "", a checkpoint folder, or "latest" (in dir)
};

// The flags' current values, checked (InvalidArgument naming the flag and the value).
absl::StatusOr<CheckpointFlags> CheckpointFlagsFromFlags();

// The folder --resume names: "latest" is the newest complete checkpoint in dir, or "" (a
// fresh start, noted on stderr as `program`'s) when there is none yet: the first start of a
// job that may restart. Throws UsageError for a folder it cannot read.
std::string ResumePath(const CheckpointFlags& flags, const char* program);

}  // namespace kiln

#endif  // KILN_EXAMPLES_CHECKPOINT_FLAGS_H_
