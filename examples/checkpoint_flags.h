// The flags of training checkpoints and resuming, shared by examples/train and examples/gpt:
//   --checkpoint_dir, --checkpoint_every, --keep_checkpoints, --resume (a folder or latest).
#ifndef KILN_EXAMPLES_CHECKPOINT_FLAGS_H_
#define KILN_EXAMPLES_CHECKPOINT_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "distributed/process/settings_agreement.h"

namespace kiln {

struct CheckpointFlags {
  std::string dir;     // training checkpoints ("": none)
  int64_t every = 0;   // steps between them; 0: only where the program always writes one
  int keep = 3;        // the newest kept
  std::string resume;  // "", a checkpoint folder, or "latest" (this run's newest in dir)
};

// The flags' current values, checked (InvalidArgument naming the flag and the value).
absl::StatusOr<CheckpointFlags> CheckpointFlagsFromFlags();

// The flags every rank must share (they save together and resume from one checkpoint), for
// SetUpRun's agreement; not recorded in checkpoints, since a restart may change them.
distributed::Settings CheckpointAgreement(const CheckpointFlags& flags);

}  // namespace kiln

#endif  // KILN_EXAMPLES_CHECKPOINT_FLAGS_H_
