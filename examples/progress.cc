#include "examples/progress.h"

#include <cstdio>
#include <string>

namespace kiln {

void Progress::Step(int epoch, int64_t step, double loss, double per_sec) {
  const auto now = std::chrono::steady_clock::now();
  const bool last = step == steps_;
  const auto status = [&] { return status_ ? " " + status_() : std::string(); };
  if (terminal_) {
    if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * step / steps_);
    std::string bar(filled, '=');
    if (filled < kWidth) bar += '>' + std::string(kWidth - filled - 1, ' ');
    std::printf("\r\033[Kepoch %d/%d [%s] %lld/%lld loss %.4f %.0f %s/s%s", epoch, epochs_, bar.c_str(),
                static_cast<long long>(step), static_cast<long long>(steps_), loss, per_sec, unit_, status().c_str());
  } else {
    const int64_t every = std::max<int64_t>(1, steps_ / 5);
    if (step % every != 0 && !last) return;
    std::printf("epoch %d/%d step %lld/%lld loss %.4f %.0f %s/s%s\n", epoch, epochs_, static_cast<long long>(step),
                static_cast<long long>(steps_), loss, per_sec, unit_, status().c_str());
  }
  std::fflush(stdout);
  last_draw_ = now;
}

void Progress::EndEpoch(int epoch, double train_loss, double test_accuracy) {
  if (terminal_) std::printf("\n");
  std::printf("epoch %d/%d done: train_loss %.4f test_accuracy %.4f\n", epoch, epochs_, train_loss, test_accuracy);
  std::fflush(stdout);
}

}  // namespace kiln
