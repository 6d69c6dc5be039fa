// examples/train's flags, checked and resolved into the settings of one run: every value a
// user can type is either a valid setting or an error naming the flag (exit 2), never a
// silent default, an overflow or a run that trains to NaN.
#ifndef KILN_EXAMPLES_TRAIN_FLAGS_H_
#define KILN_EXAMPLES_TRAIN_FLAGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/checkpoint_flags.h"
#include "examples/precision_flags.h"
#include "examples/run_watch.h"
#include "examples/shard_flag.h"

namespace kiln {

struct TrainConfig {
  std::string model;      // "mlp" or "cnn"
  int epochs = 0;         // resolved: > 0
  int batch_size = 0;     // >= 1
  double lr = 0;          // resolved: finite, > 0
  std::string optimizer;  // resolved: "sgd" or "adamw"
  double weight_decay = 0;
  uint64_t seed = 1;
  std::string data_dir;
  std::string devices;
  int threads = 0;         // per device; 0: the cores shared fairly
  std::string checkpoint;  // parameters after every epoch ("": none)
  CheckpointFlags checkpoints;
  PrecisionFlags precision;
  distributed::Sharding shard = distributed::Sharding::kNone;
  int train_limit = 0;  // 0: all
  bool cosine = true;
  bool recompute = false;            // activation checkpointing over runs of 3 layers
  double collective_timeout_s = 60;  // in (0, kMaxTimeoutSeconds]
  std::string flight_recorder_dir;   // "": $KILN_FLIGHT_RECORDER_DIR
  WatchFlags watch;                  // --metrics, --tensorboard_dir
};

// The longest --flight_recorder_dir (a path).
inline constexpr size_t kMaxFlightRecorderDir = 4096;

inline constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600;

// The flags' current values, checked (InvalidArgument naming the flag and the value).
absl::StatusOr<TrainConfig> TrainConfigFromFlags();

// What changes the math of a run, as (flag, value) pairs every rank must agree on.
std::vector<std::pair<std::string, std::string>> MathSettings(const TrainConfig& config);

}  // namespace kiln

#endif  // KILN_EXAMPLES_TRAIN_FLAGS_H_
