#include "examples/metrics_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

// The shortest text that reads back as exactly `v` (so a resumed run's records compare equal).
std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, v);
  return std::string(text, end);
}

absl::Status Errno(const std::string& path, const char* what) {
  return absl::InvalidArgumentError(absl::StrCat("--metrics=", path, ": cannot ", what, ": ", std::strerror(errno)));
}

// The step of one record line (no newline), or -1 when it has none.
int64_t RecordStep(absl::string_view line) {
  constexpr absl::string_view kKey = "\"step\":";
  const size_t at = line.find(kKey);
  if (at == absl::string_view::npos) return -1;
  absl::string_view digits = line.substr(at + kKey.size());
  size_t n = 0;
  while (n < digits.size() && absl::ascii_isdigit(static_cast<unsigned char>(digits[n]))) ++n;
  int64_t step = -1;
  if (n == 0 || n > 18 || !absl::SimpleAtoi(digits.substr(0, n), &step)) return -1;  // 18 digits fit int64
  return step;
}

}  // namespace

std::string StepJson(const StepMetrics& m, absl::string_view unit) {
  std::string json = absl::StrCat("{\"kind\":\"train\",\"step\":", m.step);
  if (m.epoch > 0) absl::StrAppend(&json, ",\"epoch\":", m.epoch);
  absl::StrAppend(&json, ",\"loss\":", Number(m.loss), ",\"lr\":", Number(m.lr), ",\"grad_norm\":", Number(m.grad_norm),
                  ",\"loss_scale\":", Number(m.loss_scale), ",\"", unit, "_per_sec\":", Number(m.per_sec),
                  ",\"peak_bytes\":[", absl::StrJoin(m.peak_bytes, ","),
                  "],\"wall_time\":", std::isfinite(m.wall_time) ? absl::StrFormat("%.3f", m.wall_time) : "null", "}");
  return json;
}

std::string EvalJson(const EvalMetrics& m) {
  std::string json = absl::StrCat("{\"kind\":\"eval\",\"step\":", m.step);
  if (m.epoch > 0) absl::StrAppend(&json, ",\"epoch\":", m.epoch);
  for (const auto& [name, value] : m.values) absl::StrAppend(&json, ",\"", name, "\":", Number(value));
  absl::StrAppend(&json, ",\"wall_time\":", std::isfinite(m.wall_time) ? absl::StrFormat("%.3f", m.wall_time) : "null",
                  "}");
  return json;
}

size_t MetricsBytesToKeep(absl::string_view contents, int64_t step) {
  size_t kept = 0;
  while (kept < contents.size()) {
    const size_t end = contents.find('\n', kept);
    if (end == absl::string_view::npos) break;  // torn: the write of a killed process
    const int64_t at = RecordStep(contents.substr(kept, end - kept));
    if (at < 0 || at > step) break;
    kept = end + 1;
  }
  return kept;
}

absl::Status MetricsLog::CheckPath(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("--metrics: an empty path");
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(path, "open it for appending");
  ::close(fd);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricsLog>> MetricsLog::Open(const std::string& path, int64_t resumed_step) {
  const int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(path, "open it for appending");
  std::unique_ptr<MetricsLog> log(new MetricsLog(path, fd));
  std::string contents;
  char buffer[1 << 16];
  for (ssize_t n; (n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(contents.size()))) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno(path, "read it");
    }
    contents.append(buffer, static_cast<size_t>(n));
  }
  const size_t keep = resumed_step > 0 ? MetricsBytesToKeep(contents, resumed_step) : 0;
  if (keep < contents.size()) {
    if (::ftruncate(fd, static_cast<off_t>(keep)) != 0) return Errno(path, "cut it to the resumed step");
    if (::fdatasync(fd) != 0) return Errno(path, "sync it");
  }
  return log;
}

MetricsLog::~MetricsLog() {
  ::fdatasync(fd_);
  ::close(fd_);
}

absl::Status MetricsLog::Append(absl::string_view record, bool sync) {
  const std::string line = absl::StrCat(record, "\n");
  for (size_t done = 0; done < line.size();) {  // one write, unless the disk fills part-way
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("--metrics=", path_, ": cannot write: ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  if (sync && ::fdatasync(fd_) != 0) {
    return absl::InternalError(absl::StrCat("--metrics=", path_, ": cannot sync: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace kiln
