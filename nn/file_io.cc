#include "nn/file_io.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln::nn {
namespace {

// One system call moves at most this much (Linux moves at most ~2 GiB anyway).
constexpr uint64_t kMaxChunk = uint64_t{1} << 30;

absl::Status Errno(const std::string& what) { return absl::ErrnoToStatus(errno, what); }

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "of an unknown kind";
}

absl::Status NotRegular(const std::string& path, mode_t mode) {
  return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file (it is ", KindOf(mode), ")"));
}

// Where a file at `path` is written: `prefix` (the directory with its slash, or empty for
// the working directory) and the file's own name.
struct Target {
  std::string prefix;
  std::string name;
  std::string dir() const { return prefix.empty() ? "." : prefix; }
};

absl::Status Exists(const std::string& path) {
  return absl::AlreadyExistsError(absl::StrCat(path, " exists already, and nothing is overwritten"));
}

// Without `replace`, anything at `path` (a link included) is refused.
absl::StatusOr<Target> CheckTarget(const std::string& path, bool replace = true) {
  if (path.empty()) return absl::InvalidArgumentError("cannot write a file at an empty path");
  const size_t slash = path.find_last_of('/');
  Target target;
  if (slash != std::string::npos) target.prefix = path.substr(0, slash + 1);
  target.name = path.substr(slash == std::string::npos ? 0 : slash + 1);
  if (target.name.empty() || target.name == "." || target.name == "..") {
    return absl::FailedPreconditionError(absl::StrCat(path, " is a directory, not a file"));
  }
  // lstat, not stat: the rename replaces whatever is at `path` itself, so a link there is
  // fine (it is replaced, its target untouched), but a directory or device is not.
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!replace) return Exists(path);
    if (S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(path, " is a directory, not a file"));
    }
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) return NotRegular(path, st.st_mode);
  } else if (errno != ENOENT) {
    return Errno(absl::StrCat("cannot write ", path));
  }
  return target;
}

struct TempFile {
  int fd;
  std::string path;
};

// A new file beside the target. Its name is random, so no one can have planted a link at it
// ahead of time, and O_EXCL refuses any name that exists all the same (a link included).
absl::StatusOr<TempFile> CreateTemp(const Target& target, const std::string& path) {
  // Short enough that the temporary name stays within NAME_MAX.
  const std::string stem = target.name.substr(0, 64);
  for (int attempt = 0; attempt < 16; ++attempt) {
    uint64_t random = 0;
    ssize_t got;
    do {
      got = getrandom(&random, sizeof(random), 0);
    } while (got < 0 && errno == EINTR);
    if (got != sizeof(random)) return Errno(absl::StrCat("cannot pick a temporary name for ", path));
    TempFile tmp{-1, absl::StrFormat("%s.%s.%016x.tmp", target.prefix, stem, random)};
    tmp.fd = open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (tmp.fd >= 0) return tmp;
    if (errno != EEXIST) {
      return Errno(absl::StrCat("cannot create a file in ", target.dir(), " to write ", path));
    }
  }
  return absl::AlreadyExistsError(
      absl::StrCat("every temporary name tried in ", target.dir(), " for ", path, " exists already"));
}

absl::Status WriteAll(int fd, absl::string_view bytes, const std::string& what) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), std::min<uint64_t>(bytes.size(), kMaxChunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(absl::StrCat("cannot write ", what));
    if (n == 0) return absl::DataLossError(absl::StrCat("cannot write ", what, ": nothing written"));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<InputFile> InputFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer. It changes nothing for the
  // regular files that are all this goes on to read.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return Errno(absl::StrCat("cannot open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const absl::Status status = Errno(absl::StrCat("cannot inspect ", path));
    close(fd);
    return status;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return NotRegular(path, st.st_mode);
  }
  return InputFile(path, fd, static_cast<uint64_t>(st.st_size));
}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

InputFile::~InputFile() {
  if (fd_ >= 0) close(fd_);
}

absl::Status InputFile::ReadAt(uint64_t offset, void* out, uint64_t n) const {
  if (offset > size_ || n > size_ - offset) {
    return absl::OutOfRangeError(
        absl::StrFormat("%s: bytes [%d, %d) lie beyond its %d bytes", path_, offset, offset + n, size_));
  }
  auto* at = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = pread(fd_, at, std::min(n, kMaxChunk), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Errno(absl::StrCat("cannot read ", path_));
    if (got == 0) {
      return absl::DataLossError(
          absl::StrFormat("%s ended at byte %d, short of the %d bytes it had when opened (it changed while read)",
                          path_, offset, size_));
    }
    at += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

namespace {

// Renames the finished temporary file onto `path`: replacing what is there, or (without
// `replace`) only where nothing is, atomically, so two writers cannot both succeed.
absl::Status MoveIntoPlace(const std::string& temp, const std::string& path, bool replace) {
  if (replace) {
    if (rename(temp.c_str(), path.c_str()) == 0) return absl::OkStatus();
    return Errno(absl::StrCat("cannot rename ", temp, " onto ", path));
  }
  int rc = renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {  // a file system without it: a hard link is exclusive too
    rc = link(temp.c_str(), path.c_str());
    if (rc == 0) unlink(temp.c_str());
  }
  if (rc == 0) return absl::OkStatus();
  if (errno == EEXIST) return Exists(path);
  return Errno(absl::StrCat("cannot rename ", temp, " onto ", path));
}

absl::Status WriteThroughTemp(const std::string& path, absl::Span<const absl::string_view> pieces, bool replace) {
  absl::StatusOr<Target> target = CheckTarget(path, replace);
  if (!target.ok()) return target.status();
  absl::StatusOr<TempFile> tmp = CreateTemp(*target, path);
  if (!tmp.ok()) return tmp.status();
  absl::Cleanup remove = [&tmp] {
    if (tmp->fd >= 0) close(tmp->fd);
    unlink(tmp->path.c_str());
  };
  const std::string what = absl::StrCat(tmp->path, " (to become ", path, ")");
  for (absl::string_view piece : pieces) {
    if (absl::Status s = WriteAll(tmp->fd, piece, what); !s.ok()) return s;
  }
  if (fsync(tmp->fd) != 0) return Errno(absl::StrCat("cannot flush ", what));
  const int closed = close(std::exchange(tmp->fd, -1));
  if (closed != 0) return Errno(absl::StrCat("cannot close ", what));
  if (absl::Status s = MoveIntoPlace(tmp->path, path, replace); !s.ok()) return s;
  std::move(remove).Cancel();

  // Without this the rename itself may not survive a crash.
  const std::string dir = target->dir();
  const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || fsync(dir_fd) != 0) {
    const absl::Status s =
        Errno(absl::StrCat(path, " is written, but its directory ", dir, " cannot be synced to disk"));
    if (dir_fd >= 0) close(dir_fd);
    return s;
  }
  close(dir_fd);
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, absl::Span<const absl::string_view> pieces) {
  return WriteThroughTemp(path, pieces, /*replace=*/true);
}

absl::Status WriteNewFileAtomically(const std::string& path, absl::Span<const absl::string_view> pieces) {
  return WriteThroughTemp(path, pieces, /*replace=*/false);
}

absl::Status CheckWritableFile(const std::string& path) {
  absl::StatusOr<Target> target = CheckTarget(path);
  if (!target.ok()) return target.status();
  absl::StatusOr<TempFile> tmp = CreateTemp(*target, path);
  if (!tmp.ok()) return tmp.status();
  close(tmp->fd);
  if (unlink(tmp->path.c_str()) != 0) return Errno(absl::StrCat("cannot remove ", tmp->path));
  return absl::OkStatus();
}

}  // namespace kiln::nn
