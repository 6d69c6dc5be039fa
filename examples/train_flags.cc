#include "examples/train_flags.h"

#include <cmath>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/idx.h"
#include "examples/checkpoint_flags.h"

ABSL_FLAG(std::string, model, "mlp", "mlp (784-256-256-10) or cnn (two conv layers)");
ABSL_FLAG(int, epochs, 0, "passes over the training set (0: 10 for mlp, 4 for cnn)");
ABSL_FLAG(int, batch_size, 64, "images per step, over every device of every process");
ABSL_FLAG(double, lr, 0, "learning rate (0: 0.05 for sgd, 0.001 for adamw)");
ABSL_FLAG(std::string, optimizer, "", "sgd (momentum 0.9) or adamw (default: sgd for mlp, adamw for cnn)");
ABSL_FLAG(double, weight_decay, 0, "weight decay");
ABSL_FLAG(uint64_t, seed, 1, "seed for initialisation, shuffling and dropout");
ABSL_FLAG(std::string, data_dir, kiln::data::kFashionMnistDir, "folder with the *-idx?-ubyte.gz files");
ABSL_FLAG(std::string, devices, "cpu:0", "devices to train on, data-parallel (e.g. cpu:0,cpu:1)");
ABSL_FLAG(int, threads, 0, "threads per device (0: the cores shared fairly)");
ABSL_FLAG(std::string, checkpoint, "", "safetensors file of the parameters written after every epoch");
ABSL_FLAG(int, train_limit, 0, "use only the first N training images (0: all)");
ABSL_FLAG(bool, cosine, true, "cosine learning-rate decay over the run");
ABSL_FLAG(bool, recompute, false,
          "keep only the input of every run of 3 layers (cnn: each conv-relu-pool) and recompute in backward");
ABSL_FLAG(double, collective_timeout, 60,
          "seconds a collective (and the rendezvous) may wait for the other devices and processes");
ABSL_FLAG(std::string, flight_recorder_dir, "",
          "folder where a failed collective dumps every rank's last calls (default: $KILN_FLIGHT_RECORDER_DIR)");

namespace kiln {
namespace {

absl::Status Bad(const std::string& flag, const std::string& value, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, ": ", why));
}

std::string Number(double v) { return absl::StrFormat("%.17g", v); }

}  // namespace

absl::StatusOr<TrainConfig> TrainConfigFromFlags() {
  TrainConfig c;
  c.model = absl::GetFlag(FLAGS_model);
  if (c.model != "mlp" && c.model != "cnn") return Bad("model", c.model, "expected mlp or cnn");
  const int epochs = absl::GetFlag(FLAGS_epochs);
  if (epochs < 0 || epochs > 100000) return Bad("epochs", absl::StrCat(epochs), "expected 0..100000 (0: the default)");
  c.epochs = epochs > 0 ? epochs : (c.model == "mlp" ? 10 : 4);
  c.batch_size = absl::GetFlag(FLAGS_batch_size);
  if (c.batch_size < 1 || c.batch_size > (1 << 20)) {
    return Bad("batch_size", absl::StrCat(c.batch_size), "--batch_size must be >= 1 (and at most 1048576)");
  }
  c.optimizer = absl::GetFlag(FLAGS_optimizer);
  if (c.optimizer.empty()) c.optimizer = c.model == "mlp" ? "sgd" : "adamw";
  if (c.optimizer != "sgd" && c.optimizer != "adamw") return Bad("optimizer", c.optimizer, "expected sgd or adamw");
  // NaN compares false with everything: each check is written so that NaN fails it.
  const double lr = absl::GetFlag(FLAGS_lr);
  if (!(std::isfinite(lr) && lr >= 0 && lr <= 1000)) {
    return Bad("lr", Number(lr), "expected a learning rate in [0, 1000] (0: the optimizer's default)");
  }
  c.lr = lr > 0 ? lr : (c.optimizer == "sgd" ? 0.05 : 0.001);
  c.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  if (!(std::isfinite(c.weight_decay) && c.weight_decay >= 0 && c.weight_decay <= 1000)) {
    return Bad("weight_decay", Number(c.weight_decay), "expected a weight decay in [0, 1000]");
  }
  c.seed = absl::GetFlag(FLAGS_seed);
  c.data_dir = absl::GetFlag(FLAGS_data_dir);
  if (c.data_dir.empty()) return Bad("data_dir", "", "expected a folder");
  c.devices = absl::GetFlag(FLAGS_devices);
  c.threads = absl::GetFlag(FLAGS_threads);
  if (c.threads < 0 || c.threads > 1024)
    return Bad("threads", absl::StrCat(c.threads), "expected 0..1024 (0: fair share)");
  c.checkpoint = absl::GetFlag(FLAGS_checkpoint);
  auto checkpoints = CheckpointFlagsFromFlags();
  if (!checkpoints.ok()) return checkpoints.status();
  c.checkpoints = *std::move(checkpoints);
  auto precision = PrecisionFlagsFromFlags();
  if (!precision.ok()) return precision.status();
  c.precision = *precision;
  auto shard = ShardingFromFlag();
  if (!shard.ok()) return shard.status();
  c.shard = *shard;
  c.train_limit = absl::GetFlag(FLAGS_train_limit);
  if (c.train_limit < 0) return Bad("train_limit", absl::StrCat(c.train_limit), "expected >= 0 (0: all images)");
  c.cosine = absl::GetFlag(FLAGS_cosine);
  c.recompute = absl::GetFlag(FLAGS_recompute);
  c.collective_timeout_s = absl::GetFlag(FLAGS_collective_timeout);
  if (!(c.collective_timeout_s > 0 && c.collective_timeout_s <= kMaxTimeoutSeconds)) {
    return Bad("collective_timeout", Number(c.collective_timeout_s),
               absl::StrCat("--collective_timeout must be > 0 seconds and at most ", kMaxTimeoutSeconds, " (a week)"));
  }
  c.flight_recorder_dir = absl::GetFlag(FLAGS_flight_recorder_dir);
  c.watch = WatchFlagsFromFlags();
  if (c.flight_recorder_dir.size() > kMaxFlightRecorderDir) {
    return Bad("flight_recorder_dir", c.flight_recorder_dir.substr(0, 40) + "...",
               absl::StrCat("a path of at most ", kMaxFlightRecorderDir, " bytes"));
  }
  return c;
}

std::vector<std::pair<std::string, std::string>> MathSettings(const TrainConfig& c) {
  std::vector<std::pair<std::string, std::string>> settings = {{"--model", c.model},
                                                               {"--epochs", absl::StrCat(c.epochs)},
                                                               {"--batch_size", absl::StrCat(c.batch_size)},
                                                               {"--lr", Number(c.lr)},
                                                               {"--optimizer", c.optimizer},
                                                               {"--weight_decay", Number(c.weight_decay)},
                                                               {"--seed", absl::StrCat(c.seed)},
                                                               {"--train_limit", absl::StrCat(c.train_limit)},
                                                               {"--cosine", c.cosine ? "true" : "false"}};
  for (auto& setting : PrecisionSettings(c.precision)) settings.push_back(std::move(setting));
  return settings;
}

}  // namespace kiln
