#include "examples/tensorboard_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tensor/crc32c.h"

namespace kiln {
namespace {

// Protobuf's wire format: a key is (field << 3 | wire type); 0 varint, 1 fixed64, 2 bytes,
// 5 fixed32, all little-endian.
void Varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>((v & 0x7f) | 0x80));
  out.push_back(static_cast<char>(v));
}
void Fixed(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void Key(std::string& out, int field, int wire_type) { Varint(out, static_cast<uint64_t>(field << 3 | wire_type)); }
void Bytes(std::string& out, int field, absl::string_view bytes) {
  Key(out, field, 2);
  Varint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

// Event's wall_time (1) and step (2), the fields every event starts with.
std::string EventHead(double wall_time, int64_t step) {
  std::string event;
  Key(event, 1, 1);
  Fixed(event, std::bit_cast<uint64_t>(wall_time), 8);
  Key(event, 2, 0);
  Varint(event, static_cast<uint64_t>(step));
  return event;
}

absl::Status Failed(const std::string& what, const std::string& path) {
  return absl::InvalidArgumentError(
      absl::StrCat("--tensorboard_dir: cannot ", what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

uint32_t MaskedCrc32c(absl::string_view bytes) {
  const uint32_t crc = Crc32c(0, bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string TfRecord(absl::string_view data) {
  std::string length;
  Fixed(length, data.size(), 8);
  std::string record = length;
  Fixed(record, MaskedCrc32c(length), 4);
  record.append(data.data(), data.size());
  Fixed(record, MaskedCrc32c(data), 4);
  return record;
}

std::string FileVersionEvent(double wall_time) {
  std::string event = EventHead(wall_time, 0);
  Bytes(event, 3, "brain.Event:2");
  return event;
}

std::string ScalarsEvent(double wall_time, int64_t step, const Scalars& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    Bytes(v, 1, tag);
    Key(v, 2, 5);
    Fixed(v, std::bit_cast<uint32_t>(static_cast<float>(value)), 4);
    Bytes(summary, 1, v);
  }
  std::string event = EventHead(wall_time, step);
  Bytes(event, 5, summary);
  return event;
}

std::string SessionStartEvent(double wall_time, int64_t step) {
  std::string session_log;
  Key(session_log, 1, 0);
  Varint(session_log, 1);  // SessionLog.START
  std::string event = EventHead(wall_time, step);
  Bytes(event, 6, session_log);
  return event;
}

absl::Status TensorBoardWriter::CheckDir(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("--tensorboard_dir: an empty path");
  std::error_code error;
  std::filesystem::create_directories(dir, error);  // false, no error, when it exists
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tensorboard_dir: cannot create ", dir, ": ", error ? error.message() : std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat("--tensorboard_dir=", dir, ": not a folder"));
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return Failed("write into", dir);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::Open(const std::string& dir,
                                                                           int64_t resumed_step) {
  if (absl::Status s = CheckDir(dir); !s.ok()) return s;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  // TensorBoard reads every file with "tfevents" in its name, in name order: time first.
  const std::string path = absl::StrFormat("%s/events.out.tfevents.%010lld.%s.%d.kiln", dir,
                                           static_cast<long long>(now), host, static_cast<int>(::getpid()));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Failed("create", path);
  std::unique_ptr<TensorBoardWriter> writer(new TensorBoardWriter(path, fd));
  if (absl::Status s = writer->Write(FileVersionEvent(now), false); !s.ok()) return s;
  if (resumed_step > 0) {
    if (absl::Status s = writer->Write(SessionStartEvent(now, resumed_step + 1), false); !s.ok()) return s;
  }
  return writer;
}

TensorBoardWriter::~TensorBoardWriter() {
  ::fdatasync(fd_);
  ::close(fd_);
}

absl::Status TensorBoardWriter::Add(double wall_time, int64_t step, const Scalars& scalars, bool sync) {
  Scalars finite;
  for (const auto& scalar : scalars) {
    if (std::isfinite(scalar.second)) finite.push_back(scalar);
  }
  return Write(ScalarsEvent(wall_time, step, finite), sync);
}

absl::Status TensorBoardWriter::Write(absl::string_view event, bool sync) {
  const std::string record = TfRecord(event);
  for (size_t done = 0; done < record.size();) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return absl::InternalError(absl::StrCat("--tensorboard_dir: cannot write ", path_, ": ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  if (sync && ::fdatasync(fd_) != 0) {
    return absl::InternalError(absl::StrCat("--tensorboard_dir: cannot sync ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace kiln
