// A training checkpoint's state file on any bytes: ReadSafetensors (and its metadata alone,
// which must agree), the random streams and the run position its metadata holds
// (examples/train_position) checked against a run's settings and against what such a run could
// write (CheckPosition, with and without a loss scaler). An error names the file; a position
// that parses is one a run can continue from, and writing it back gives the same metadata.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "examples/train_position.h"
#include "fuzz/memory_file.h"
#include "nn/activation.h"
#include "nn/safetensors.h"
#include "nn/training_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kiln::fuzz::MemoryFile input(data, size);
  const std::string path = input.path();
  const auto file = kiln::nn::ReadSafetensors(path);
  const auto metadata = kiln::nn::ReadSafetensorsMetadata(path);
  if (file.ok() && (!metadata.ok() || *metadata != file->metadata)) std::abort();
  if (!file.ok()) return 0;
  kiln::nn::Dropout<kiln::Autodiff<kiln::Cpu>> dropout(0.5, 1);  // one random stream, "masks"
  const auto streams = kiln::nn::StreamStates(file->metadata, dropout.named_generators(), path);
  if (!streams.ok() && streams.status().message().find(path) == std::string::npos) std::abort();
  if (streams.ok() && streams->size() != 1) std::abort();
  const kiln::distributed::Settings settings = {{"--model", "mlp"}, {"--batch_size", "64"}};
  const auto position = kiln::ParsePosition(file->metadata, settings, path);
  if (!position.ok()) {
    if (position.status().message().find(path) == std::string::npos) std::abort();
    return 0;
  }
  const kiln::TrainPosition& p = *position;
  if (p.epoch < 1 || p.members < 1 || p.step < 0 || p.step_in_epoch < 0 || p.step_in_epoch > p.step) std::abort();
  const kiln::nn::LossScaler scaler;
  for (const kiln::nn::LossScaler* with : {static_cast<const kiln::nn::LossScaler*>(nullptr), &scaler}) {
    const kiln::PositionRules rules{.min_steps_per_epoch = 93,
                                    .max_steps_per_epoch = 94,
                                    .epochs = 3,
                                    .next_epoch_at_end = true,
                                    .first_data_generator = 7,
                                    .draws_per_step = 2,
                                    .draws_per_epoch = 5999,
                                    .loss_scaler = with};
    const absl::Status checked = kiln::CheckPosition(p, p.step, rules, path);
    if (!checked.ok() && checked.message().find(path) == std::string::npos) std::abort();
    if (checked.ok() && (p.epoch > 4 || p.step_in_epoch > 94 || p.step > 3 * 94)) std::abort();
  }
  // What the position writes back parses to the same position.
  const auto again = kiln::ParsePosition(kiln::PositionMetadata(p, settings), settings, path);
  if (!again.ok() || again->step != p.step || again->data_generator != p.data_generator ||
      again->generators != p.generators || again->loss_sum != p.loss_sum) {
    std::abort();
  }
  return 0;
}
