#include "examples/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"

namespace kiln {

std::string FormatEta(double seconds) {
  if (!(seconds >= 0 && seconds < 1e9)) return "eta ?";
  const long long s = std::llround(seconds);
  if (s >= 3600) return absl::StrFormat("eta %lldh%02lldm", s / 3600, s / 60 % 60);
  if (s >= 60) return absl::StrFormat("eta %lldm%02llds", s / 60, s % 60);
  return absl::StrFormat("eta %llds", s);
}

std::string Progress::Eta(int epoch, int64_t step, std::chrono::steady_clock::time_point now) const {
  const int64_t left = (epochs_ - epoch) * steps_ + (steps_ - step);
  const double per_step = std::chrono::duration<double>(now - start_).count() / static_cast<double>(calls_);
  return FormatEta(per_step * static_cast<double>(left));
}

void Progress::Step(int epoch, int64_t step, double loss, double per_sec) {
  const auto now = std::chrono::steady_clock::now();
  ++calls_;
  const bool last = step == steps_;
  const auto status = [&] { return status_ ? " " + status_() : std::string(); };
  if (terminal_) {
    if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * step / steps_);
    std::string bar(filled, '=');
    if (filled < kWidth) bar += '>' + std::string(kWidth - filled - 1, ' ');
    const std::string of_epochs = epochs_ > 1 ? absl::StrFormat("epoch %d/%d ", epoch, epochs_) : "step ";
    std::fprintf(out_, "\r\033[K%s[%s] %lld/%lld loss %.4f %.0f %s/s %s%s", of_epochs.c_str(), bar.c_str(),
                 static_cast<long long>(step), static_cast<long long>(steps_), loss, per_sec, unit_,
                 Eta(epoch, step, now).c_str(), status().c_str());
    drawn_ = true;
  } else {
    const int64_t every = std::max<int64_t>(1, steps_ / 5);
    if (step % every != 0 && !last) return;
    std::fprintf(out_, "epoch %d/%d step %lld/%lld loss %.4f %.0f %s/s%s\n", epoch, epochs_,
                 static_cast<long long>(step), static_cast<long long>(steps_), loss, per_sec, unit_, status().c_str());
  }
  std::fflush(out_);
  last_draw_ = now;
}

void Progress::EndEpoch(int epoch, double train_loss, double test_accuracy) {
  if (terminal_) std::fprintf(out_, "\n");
  drawn_ = false;
  std::fprintf(out_, "epoch %d/%d done: train_loss %.4f test_accuracy %.4f\n", epoch, epochs_, train_loss,
               test_accuracy);
  std::fflush(out_);
}

void Progress::Clear() {
  if (!drawn_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  drawn_ = false;
  last_draw_ = {};  // redraw at the next step
}

}  // namespace kiln
