// One run at a time per checkpoint folder. Two runs writing one --checkpoint_dir would prune
// and resume each other's checkpoints; the lock refuses the second with a message naming the
// first. It is flock(2) on <dir>/.lock, which the kernel releases when its holder dies however
// it dies, so a killed run never leaves it stuck (flock is also honoured over NFSv4). The file
// records its holder (pid, host, since when, run): for the refusal's message, and so that the
// next run knows which run the folder's checkpoints were last written by.
#ifndef KILN_NN_CHECKPOINT_LOCK_H_
#define KILN_NN_CHECKPOINT_LOCK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::nn {

struct LockRecord {
  int64_t pid = 0;
  std::string host;
  int64_t since = 0;  // seconds since 1970 (UTC)
  std::string run;    // NewRunId()
};

std::string FormatLockRecord(const LockRecord& record);
// nullopt unless `text` is exactly what FormatLockRecord writes for sane values (the file
// comes from outside: a pid in [1, 2^31), a printable host name of at most 255 bytes, a run
// of 1 to 64 lower-case hex digits).
std::optional<LockRecord> ParseLockRecord(absl::string_view text);

class CheckpointDirLock {
 public:
  // Takes the lock of `dir` (which must exist) without waiting: FailedPrecondition naming the
  // holder ("... is in use by another run: pid 41 on host a since 2026-12-03 10:00:00 UTC (run
  // 3f...)") when another process holds it.
  static absl::StatusOr<std::unique_ptr<CheckpointDirLock>> Take(const std::string& dir);
  ~CheckpointDirLock();  // releases it
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;

  // What the last holder recorded (nullopt: none, or unreadable).
  const std::optional<LockRecord>& previous() const { return previous_; }
  // Records this process as the holder, writing for `run`.
  absl::Status Record(const std::string& run);

 private:
  CheckpointDirLock(int fd, std::string path, std::optional<LockRecord> previous)
      : fd_(fd), path_(std::move(path)), previous_(std::move(previous)) {}
  int fd_;
  std::string path_;
  std::optional<LockRecord> previous_;
};

}  // namespace kiln::nn

#endif  // KILN_NN_CHECKPOINT_LOCK_H_
