// examples/train's command line on any bytes (split at newlines into arguments): a strict
// parse and the checks of every value, never a crash, an exit or an uncaught exception; what
// passes is a runnable configuration.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/reflection.h"
#include "absl/strings/str_split.h"
#include "examples/command_line.h"
#include "examples/train_flags.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::FlagSaver restore;  // every input starts from the defaults
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> args = absl::StrSplit(text, '\n');
  const auto parsed = kiln::ParseCommandLineStrictly(args);
  if (!parsed.ok() || *parsed != kiln::CommandLine::kRun) return 0;
  const auto config = kiln::TrainConfigFromFlags();
  if (!config.ok()) return 0;
  const kiln::TrainConfig& c = *config;
  const bool runnable = (c.model == "mlp" || c.model == "cnn") && c.epochs > 0 && c.batch_size >= 1 &&
                        std::isfinite(c.lr) && c.lr > 0 && std::isfinite(c.weight_decay) && c.weight_decay >= 0 &&
                        (c.optimizer == "sgd" || c.optimizer == "adamw") && c.threads >= 0 && c.train_limit >= 0 &&
                        c.collective_timeout_s > 0 && c.collective_timeout_s <= kiln::kMaxTimeoutSeconds;
  if (!runnable) std::abort();
  (void)kiln::MathSettings(c);
  return 0;
}
