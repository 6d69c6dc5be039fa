#include "nn/checkpoint_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace kiln::nn {
namespace {

constexpr char kHeading[] = "kiln checkpoint folder lock";
constexpr size_t kMaxRecord = 1024;

// Digits only, without leading zeros: one text per number.
bool Digits(absl::string_view s, int max_size) {
  if (s.empty() || static_cast<int>(s.size()) > max_size || (s.size() > 1 && s[0] == '0')) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::string Utc(int64_t seconds) {
  const time_t t = static_cast<time_t>(seconds);
  struct tm tm;
  char text[64];
  if (gmtime_r(&t, &tm) == nullptr || strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &tm) == 0) return "?";
  return text;
}

std::string ReadAll(int fd) {
  std::string text(kMaxRecord + 1, '\0');
  const ssize_t n = pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? n : 0);
  return text;
}

}  // namespace

std::string FormatLockRecord(const LockRecord& r) {
  return absl::StrCat(kHeading, "\npid=", r.pid, "\nhost=", r.host, "\nsince=", r.since, "\nrun=", r.run, "\n");
}

std::optional<LockRecord> ParseLockRecord(absl::string_view text) {
  if (text.size() > kMaxRecord) return std::nullopt;
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines.size() != 6 || lines[0] != kHeading || !lines[5].empty()) return std::nullopt;
  const std::pair<absl::string_view, absl::string_view> fields[] = {
      {"pid=", lines[1]}, {"host=", lines[2]}, {"since=", lines[3]}, {"run=", lines[4]}};
  std::string value[4];
  for (int i = 0; i < 4; ++i) {
    if (!absl::StartsWith(fields[i].second, fields[i].first)) return std::nullopt;
    value[i] = std::string(fields[i].second.substr(fields[i].first.size()));
  }
  LockRecord r;
  if (!Digits(value[0], 10) || !absl::SimpleAtoi(value[0], &r.pid) || r.pid < 1 || r.pid >= (int64_t{1} << 31)) {
    return std::nullopt;
  }
  if (value[1].empty() || value[1].size() > 255) return std::nullopt;
  for (char c : value[1]) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) return std::nullopt;
  }
  r.host = value[1];
  if (!Digits(value[2], 18) || !absl::SimpleAtoi(value[2], &r.since)) return std::nullopt;
  if (value[3].empty() || value[3].size() > 64) return std::nullopt;
  for (char c : value[3]) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c)) || absl::ascii_isupper(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
  }
  r.run = value[3];
  return r;
}

absl::StatusOr<std::unique_ptr<CheckpointDirLock>> CheckpointDirLock::Take(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/.lock");
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open the folder's lock ", path));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::optional<LockRecord> holder = ParseLockRecord(ReadAll(fd));
    close(fd);
    if (error != EWOULDBLOCK) return absl::ErrnoToStatus(error, absl::StrCat("cannot lock ", path));
    const std::string who = holder ? absl::StrFormat("pid %d on host %s since %s (run %s)", holder->pid, holder->host,
                                                     Utc(holder->since), holder->run)
                                   : std::string("a process that has not recorded itself yet");
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " is in use by another run: ", who,
                     ". Two runs writing one folder would prune and resume each other's checkpoints: wait for it to "
                     "end, or give this run a --checkpoint_dir of its own"));
  }
  return std::unique_ptr<CheckpointDirLock>(new CheckpointDirLock(fd, path, ParseLockRecord(ReadAll(fd))));
}

CheckpointDirLock::~CheckpointDirLock() { close(fd_); }

absl::Status CheckpointDirLock::Record(const std::string& run) {
  const std::string text = FormatLockRecord(
      {.pid = getpid(), .host = HostName(), .since = static_cast<int64_t>(std::time(nullptr)), .run = run});
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      fdatasync(fd_) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot write the folder's lock ", path_));
  }
  return absl::OkStatus();
}

}  // namespace kiln::nn
