#include "examples/run_watch.h"

#include <chrono>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, metrics, "", "append one JSON line per step and per evaluation to this file (.jsonl)");
ABSL_FLAG(std::string, tensorboard_dir, "", "write TensorBoard event files of the metrics into this folder");

namespace kiln {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

WatchFlags WatchFlagsFromFlags() {
  return {.metrics = absl::GetFlag(FLAGS_metrics), .tensorboard_dir = absl::GetFlag(FLAGS_tensorboard_dir)};
}

absl::Status CheckWatchPaths(const WatchFlags& flags) {
  if (!flags.metrics.empty()) {
    if (absl::Status s = MetricsLog::CheckPath(flags.metrics); !s.ok()) return s;
  }
  if (!flags.tensorboard_dir.empty()) return TensorBoardWriter::CheckDir(flags.tensorboard_dir);
  return absl::OkStatus();
}

absl::Status RunWatch::Open(int64_t resumed_step) {
  if (!flags_.metrics.empty()) {
    auto log = MetricsLog::Open(flags_.metrics, resumed_step);
    if (!log.ok()) return log.status();
    metrics_ = *std::move(log);
  }
  if (!flags_.tensorboard_dir.empty()) {
    auto writer = TensorBoardWriter::Open(flags_.tensorboard_dir, resumed_step);
    if (!writer.ok()) return writer.status();
    tensorboard_ = *std::move(writer);
  }
  return absl::OkStatus();
}

absl::Status RunWatch::Step(StepMetrics m, bool sync) {
  m.wall_time = Now();
  if (metrics_) {
    if (absl::Status s = metrics_->Append(StepJson(m, unit_), sync); !s.ok()) return s;
  }
  if (!tensorboard_) return absl::OkStatus();
  Scalars scalars = {{"train/loss", m.loss},
                     {"train/lr", m.lr},
                     {"train/grad_norm", m.grad_norm},
                     {"train/loss_scale", m.loss_scale},
                     {absl::StrCat("train/", unit_, "_per_sec"), m.per_sec}};
  for (size_t d = 0; d < m.peak_bytes.size(); ++d) {
    scalars.emplace_back(absl::StrCat("memory/peak_bytes_device", d), static_cast<double>(m.peak_bytes[d]));
  }
  return tensorboard_->Add(m.wall_time, m.step, scalars, sync);
}

absl::Status RunWatch::Eval(EvalMetrics m) {
  m.wall_time = Now();
  if (metrics_) {
    if (absl::Status s = metrics_->Append(EvalJson(m), true); !s.ok()) return s;
  }
  if (!tensorboard_) return absl::OkStatus();
  Scalars scalars;
  for (const auto& [name, value] : m.values) scalars.emplace_back(absl::StrCat("eval/", name), value);
  return tensorboard_->Add(m.wall_time, m.step, scalars, true);
}

}  // namespace kiln
