// Training progress: a bar redrawn in place on a terminal, plain lines otherwise (logs, CI).
#ifndef KILN_EXAMPLES_PROGRESS_H_
#define KILN_EXAMPLES_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace kiln {

class Progress {
 public:
  // `unit`: what the rate counts ("samples", "tokens"). `status`, if given, is called for each
  // line drawn and its text ends the line (memory_report.h's MemoryStatus).
  Progress(bool terminal, int64_t steps_per_epoch, int epochs, const char* unit = "samples",
           std::function<std::string()> status = nullptr)
      : terminal_(terminal), steps_(steps_per_epoch), epochs_(epochs), unit_(unit), status_(std::move(status)) {}
  void Step(int epoch, int64_t step, double loss, double per_sec);
  void EndEpoch(int epoch, double train_loss, double test_accuracy);

 private:
  bool terminal_;
  int64_t steps_;
  int epochs_;
  const char* unit_;
  std::function<std::string()> status_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace kiln

#endif  // KILN_EXAMPLES_PROGRESS_H_
