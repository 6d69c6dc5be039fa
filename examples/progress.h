// Training progress: on a terminal one line redrawn in place (\r) with a bar, the loss, the
// throughput and the time left; plain lines otherwise (logs, CI), unchanged.
#ifndef KILN_EXAMPLES_PROGRESS_H_
#define KILN_EXAMPLES_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

namespace kiln {

class Progress {
 public:
  // `unit`: what the rate counts ("samples", "tokens"). `status`, if given, is called for each
  // line drawn and its text ends the line (memory_report.h's MemoryStatus). `out`: where to.
  Progress(bool terminal, int64_t steps_per_epoch, int epochs, const char* unit = "samples",
           std::function<std::string()> status = nullptr, std::FILE* out = stdout)
      : terminal_(terminal),
        steps_(steps_per_epoch),
        epochs_(epochs),
        unit_(unit),
        status_(std::move(status)),
        out_(out),
        start_(std::chrono::steady_clock::now()) {}
  // Step `step` (1..steps_per_epoch) of `epoch` (1..epochs) is done; one call per step (the
  // time left is the time per call so far times the steps to go).
  void Step(int epoch, int64_t step, double loss, double per_sec);
  void EndEpoch(int epoch, double train_loss, double test_accuracy);
  // Before other output: the terminal's progress line cleared (the next Step redraws it).
  void Clear();

 private:
  std::string Eta(int epoch, int64_t step, std::chrono::steady_clock::time_point now) const;

  bool terminal_;
  int64_t steps_;
  int epochs_;
  const char* unit_;
  std::function<std::string()> status_;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_, last_draw_{};
  int64_t calls_ = 0;
  bool drawn_ = false;  // a terminal line is showing
};

// "eta 1h02m", "eta 3m05s", "eta 42s" (rounded to the second); "eta ?" for no estimate.
std::string FormatEta(double seconds);

}  // namespace kiln

#endif  // KILN_EXAMPLES_PROGRESS_H_
