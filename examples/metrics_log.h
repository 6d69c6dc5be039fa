// --metrics=FILE.jsonl: one JSON object a line, one per training step and one per evaluation,
// that a run appends to and a resumed run continues without a duplicated or lost step.
//
// Each record is one write() of a whole line: a process killed at any point (kill -9) leaves
// whole lines, since the kernel's page cache keeps what was written. A resumed run first cuts
// the file after the last record at or before the step it resumes from, then appends. The
// file is fsynced where a checkpoint is about to be made (the record before a checkpoint, every
// evaluation, the end), so after a machine crash too every record up to a saved checkpoint's
// step is on disk; syncing every step would cost a disk flush per step for nothing more.
#ifndef KILN_EXAMPLES_METRICS_LOG_H_
#define KILN_EXAMPLES_METRICS_LOG_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

// One training step, as the examples log it.
struct StepMetrics {
  int64_t step = 0;   // steps done, counting this one (1 for the first)
  int64_t epoch = 0;  // 0: a run without epochs (no "epoch" field)
  double loss = NAN;  // this step's mean loss over its global batch
  double lr = NAN;
  double grad_norm = NAN;           // global L2 norm before clipping; NaN (null): not measured
  double loss_scale = NAN;          // NaN (null): no loss scaling
  double per_sec = NAN;             // throughput, in the log's unit ("tokens" or "samples") per second
  std::vector<int64_t> peak_bytes;  // each local device's peak tensor bytes
  double wall_time = 0;             // seconds since the Unix epoch
};

// One evaluation: named values ("val_loss", "test_accuracy") after step `step`.
struct EvalMetrics {
  int64_t step = 0, epoch = 0;
  std::vector<std::pair<std::string, double>> values;
  double wall_time = 0;
};

// {"kind":"train","step":3,...} and {"kind":"eval",...}, without the newline; NaN and
// infinities are null (JSON has neither).
std::string StepJson(const StepMetrics& m, absl::string_view unit);
std::string EvalJson(const EvalMetrics& m);

// How many leading bytes of a metrics file a run resumed after `step` keeps: every whole line
// up to the first that is past `step`, torn (no newline) or not a record with a "step".
size_t MetricsBytesToKeep(absl::string_view contents, int64_t step);

class MetricsLog {
 public:
  // Whether `path` can be appended to (it is created if missing, left as it is otherwise):
  // InvalidArgument naming it.
  static absl::Status CheckPath(const std::string& path);
  // Opens `path` for a run that starts after step `resumed_step` (0: a new run, which starts
  // the file afresh), cutting what lies past it.
  static absl::StatusOr<std::unique_ptr<MetricsLog>> Open(const std::string& path, int64_t resumed_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Appends `record` and a newline in one write; `sync`: fsync after it.
  absl::Status Append(absl::string_view record, bool sync);

 private:
  MetricsLog(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

}  // namespace kiln

#endif  // KILN_EXAMPLES_METRICS_LOG_H_
