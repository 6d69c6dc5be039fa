// Where a training run stands, as its training checkpoint records it (metadata of
// nn::TrainingCheckpoint's state file): enough, with the model and the optimizer, to go on
// exactly as if the run had never stopped. Every value read back from a file is checked.
#ifndef KILN_EXAMPLES_TRAIN_POSITION_H_
#define KILN_EXAMPLES_TRAIN_POSITION_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "distributed/process/settings_agreement.h"
#include "nn/loss_scaler.h"

namespace kiln {

struct TrainPosition {
  int64_t step = 0;                   // steps done in all
  int64_t epoch = 1;                  // the epoch running (1-based)
  int64_t step_in_epoch = 0;          // steps of `epoch` done
  uint64_t data_generator = 0;        // the data order's generator as `epoch` began (train: before its
                                      // shuffle) or at `step` (gpt: before the next batch's draw)
  double loss_sum = 0;                // the losses of `epoch`'s steps so far
  double last_epoch_loss = 0;         // the mean loss of the epoch before `epoch` (0: none)
  int64_t members = 1;                // devices over every process that trained until here
  std::string devices;                // those of rank 0, e.g. "cpu:0,cpu:1", and the process count
  std::vector<uint64_t> generators;   // DataParallel::GeneratorStates()
  bool has_data_position = false;     // a token dataset's window order (gpt --train_data): where
  int64_t data_epoch = 0;             // it stands (data::SamplerPosition), kept only by runs
  int64_t data_drawn = 0;             // that have one
  bool has_loss_scale = false;        // read back: whether the checkpoint had one
  double loss_scale = 0;              // the loss scaler's scale (0: the run has none)
  int64_t loss_scale_good_steps = 0;  // and its good steps since the last change
};

// The metadata of a checkpoint at `position` of a run with `settings` (flag, value).
std::map<std::string, std::string> PositionMetadata(const TrainPosition& position,
                                                    const distributed::Settings& settings);

// The position in a checkpoint's metadata (`path` names it in errors): InvalidArgument naming
// the first key that is missing or malformed, or the first setting that differs from this
// run's `settings` ("... was written by a run with --batch_size=64; this run has 128").
absl::StatusOr<TrainPosition> ParsePosition(const std::map<std::string, std::string>& metadata,
                                            const distributed::Settings& settings, const std::string& path);

// What a run with this run's settings could have written: the checks that make a tampered or
// mismatched position an error rather than a resumed run with wrong results.
struct PositionRules {
  // Steps in an epoch: the last, partial batch may be dropped, so resuming on another number of
  // devices may see one step more or less per epoch than the writer did.
  int64_t min_steps_per_epoch = 1, max_steps_per_epoch = 1;
  int64_t epochs = 1;              // in the run
  bool next_epoch_at_end = false;  // an epoch's end is written as the next epoch at step 0
  // The data order's generator: `first` at step 0, advanced `draws_per_step` per step and
  // `draws_per_epoch` as each epoch begins (before its first step).
  uint64_t first_data_generator = 0;
  uint64_t draws_per_step = 0, draws_per_epoch = 0;
  const nn::LossScaler* loss_scaler = nullptr;  // the run's, if it scales its loss
};

// InvalidArgument naming what no run with `rules` writes: a step, step in the epoch or epoch
// out of range or not adding up, a data position the steps do not reach, an optimizer step
// count above the steps, a loss scale missing, present without a scaler, or unreachable.
absl::Status CheckPosition(const TrainPosition& position, int64_t optimizer_steps, const PositionRules& rules,
                           const std::string& path);

}  // namespace kiln

#endif  // KILN_EXAMPLES_TRAIN_POSITION_H_
