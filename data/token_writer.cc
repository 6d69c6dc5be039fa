#include "data/token_writer.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kiln::data {
namespace {

constexpr int64_t kChunkTokens = int64_t{1} << 20;

absl::Status Errno(const std::string& what) { return absl::ErrnoToStatus(errno, what); }

absl::Status WriteAll(int fd, const uint8_t* bytes, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t wrote = write(fd, bytes, n);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return Errno(absl::StrCat("cannot write ", path));
    bytes += wrote;
    n -= static_cast<size_t>(wrote);
  }
  return absl::OkStatus();
}

void PutInt32(std::vector<uint8_t>& out, int32_t v) {
  for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(static_cast<uint32_t>(v) >> (8 * b)));
}

// The header (shards only) and the tokens as little-endian uint16, chunk by chunk.
absl::Status WriteBody(int fd, const std::string& path, TokenFormat format, const TokenDataset& source, int64_t begin,
                       int64_t count, const std::function<void(int64_t)>& progress) {
  std::vector<uint8_t> bytes;
  if (format == TokenFormat::kShard) {
    PutInt32(bytes, kShardMagic);
    PutInt32(bytes, kShardVersion);
    PutInt32(bytes, static_cast<int32_t>(count));
    bytes.resize(kShardHeaderBytes, 0);
  }
  std::vector<int64_t> ids;
  for (int64_t done = 0; done < count;) {
    ids.resize(std::min(kChunkTokens, count - done));
    if (absl::Status s = source.Read(begin + done, absl::MakeSpan(ids)); !s.ok()) return s;
    for (int64_t id : ids) {
      if (id > 0xffff) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": token id ", id, " does not fit in uint16"));
      }
      bytes.push_back(static_cast<uint8_t>(id));
      bytes.push_back(static_cast<uint8_t>(id >> 8));
    }
    if (absl::Status s = WriteAll(fd, bytes.data(), bytes.size(), path); !s.ok()) return s;
    bytes.clear();
    done += static_cast<int64_t>(ids.size());
    if (progress) progress(done);
  }
  if (fsync(fd) != 0) return Errno(absl::StrCat("cannot flush ", path));
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteTokenFile(const std::string& path, TokenFormat format, const TokenDataset& source, int64_t begin,
                            int64_t count, const std::function<void(int64_t)>& progress) {
  if (format != TokenFormat::kRaw && format != TokenFormat::kShard) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": token files are written as bin or shard, not ", TokenFormatName(format)));
  }
  if (begin < 0 || count < 1 || begin > source.size() - count) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tokens [", begin, ", ", begin + count, ") are not in the source's ", source.size()));
  }
  if (format == TokenFormat::kShard && count > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", count, " tokens are more than a shard's header counts (", INT32_MAX, ")"));
  }
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) return absl::AlreadyExistsError(absl::StrCat(path, " exists already"));
  std::string temp = absl::StrCat(path, ".tmp-XXXXXX");
  const int fd = mkstemp(temp.data());  // O_CREAT | O_EXCL: never through a planted link
  if (fd < 0) return Errno(absl::StrCat("cannot create a file beside ", path));
  fchmod(fd, 0644);  // mkstemp's 0600 would keep the data from other users
  absl::Status status = WriteBody(fd, path, format, source, begin, count, progress);
  if (close(fd) != 0 && status.ok()) status = Errno(absl::StrCat("cannot close ", path));
  if (status.ok() && renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0) {
    status = errno == EEXIST ? absl::AlreadyExistsError(absl::StrCat(path, " exists already"))
                             : Errno(absl::StrCat("cannot rename ", temp, " to ", path));
  }
  if (!status.ok()) {
    unlink(temp.c_str());
    return status;
  }
  // The rename itself on disk: the folder's entry synced.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  return status;
}

}  // namespace kiln::data
