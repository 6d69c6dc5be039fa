// What a run leaves to watch it by, shared by examples/train and examples/gpt:
//   --metrics=FILE.jsonl    one JSON line per step and per evaluation (metrics_log.h)
//   --tensorboard_dir=DIR   TensorBoard event files of the same values (tensorboard_writer.h)
// Rank 0 writes them; every rank checks the paths first, so a bad one stops every process
// alike (exit 2) before any checkpoint is read or written.
#ifndef KILN_EXAMPLES_RUN_WATCH_H_
#define KILN_EXAMPLES_RUN_WATCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "examples/metrics_log.h"
#include "examples/tensorboard_writer.h"

namespace kiln {

struct WatchFlags {
  std::string metrics;          // "": none
  std::string tensorboard_dir;  // "": none
};

// The flags' values (nothing touched on disk).
WatchFlags WatchFlagsFromFlags();

// Whether the paths can be written (the metrics file is created if missing, the folder made
// if missing): InvalidArgument naming the flag and the path.
absl::Status CheckWatchPaths(const WatchFlags& flags);

class RunWatch {
 public:
  // `unit`: what the throughput counts ("tokens", "samples"). Writes nothing until Open.
  RunWatch(WatchFlags flags, const char* unit) : flags_(std::move(flags)), unit_(unit) {}

  // The lead's files, for a run that starts after `resumed_step` (0: a new run).
  absl::Status Open(int64_t resumed_step);

  // A step's record (its wall_time set here); `sync`: a checkpoint follows, make it durable.
  absl::Status Step(StepMetrics m, bool sync);
  // An evaluation's record, always synced (a checkpoint usually follows).
  absl::Status Eval(EvalMetrics m);

 private:
  WatchFlags flags_;
  const char* unit_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

// Each of `devices`' peak tensor bytes, for StepMetrics.
template <class B>
std::vector<int64_t> PeakBytes(const std::vector<typename B::Device>& devices) {
  std::vector<int64_t> peaks;
  for (const auto& d : devices) peaks.push_back(B::memory_usage(d).peak_bytes);
  return peaks;
}

}  // namespace kiln

#endif  // KILN_EXAMPLES_RUN_WATCH_H_
