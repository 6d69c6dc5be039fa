#include "data/idx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln::data {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 31;  // 2 GiB of bytes: far beyond any IDX set
// Compressed data is read this much at a time, so that memory grows only as data arrives.
constexpr int64_t kChunk = int64_t{1} << 20;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

absl::Status Malformed(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(path, " is not a valid IDX file: ", what));
}

// A regular file open for reading, and its size. O_NONBLOCK keeps a FIFO from waiting for a
// writer; anything but a regular file is refused before a byte is read.
absl::StatusOr<int> OpenRegular(const std::string& path, int64_t* size) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const absl::Status status = absl::ErrnoToStatus(errno, absl::StrCat("cannot inspect ", path));
    close(fd);
    return status;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is not a regular file (it is ", S_ISDIR(st.st_mode) ? "a directory" : "a FIFO, socket or device", ")"));
  }
  *size = st.st_size;
  return fd;
}

// Reads exactly `n` bytes into `out`.
bool ReadExactly(gzFile file, void* out, int64_t n) { return gzread(file, out, static_cast<unsigned>(n)) == n; }

// The magic number (unsigned bytes, rank 1..4) and the dims, each at least 1 and all within
// kMaxElements.
absl::StatusOr<Dims> ReadHeader(gzFile file, const std::string& path) {
  unsigned char magic[4];
  if (!ReadExactly(file, magic, 4)) return Malformed(path, "shorter than its 4-byte magic number");
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08) {
    return Malformed(path, absl::StrFormat("magic %02x%02x%02x%02x is not an unsigned-byte IDX file", magic[0],
                                           magic[1], magic[2], magic[3]));
  }
  const int rank = magic[3];
  if (rank < 1 || rank > 4) return Malformed(path, absl::StrFormat("rank %d is not 1..4", rank));
  Dims dims;
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    unsigned char b[4];
    if (!ReadExactly(file, b, 4)) return Malformed(path, "truncated in its dimensions");
    const int64_t size = (int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    if (size < 1 || count * size > kMaxElements) {
      return Malformed(path, absl::StrFormat("dimension %d has size %d", d, size));
    }
    count *= size;
    dims.push_back(size);
  }
  return dims;
}

// The `count` data bytes after a header of `header_bytes`, and nothing after them.
absl::StatusOr<std::vector<unsigned char>> ReadData(gzFile file, const std::string& path, int64_t count,
                                                    int64_t file_size, int64_t header_bytes) {
  std::vector<unsigned char> bytes;
  if (gzdirect(file)) {
    // Not compressed: the file's size says at once whether the claimed data is there.
    const int64_t data_bytes = file_size - header_bytes;
    if (data_bytes < count)
      return Malformed(path, absl::StrFormat("%d of %d data bytes (truncated)", data_bytes, count));
    if (data_bytes > count) return Malformed(path, "trailing bytes after the data");
    bytes.reserve(count);
  }
  // Compressed: the claim is believed only as far as decompressed bytes arrive, so a small
  // file claiming gigabytes fails after reading what it holds, with memory to match.
  while (static_cast<int64_t>(bytes.size()) < count) {
    const size_t have = bytes.size();
    const int64_t want = std::min(count - static_cast<int64_t>(have), kChunk);
    bytes.resize(have + want);
    const int got = gzread(file, bytes.data() + have, static_cast<unsigned>(want));
    bytes.resize(have + std::max(got, 0));
    if (got < want) break;
  }
  if (static_cast<int64_t>(bytes.size()) != count) {
    int code = 0;
    const char* zerror = gzerror(file, &code);
    return Malformed(
        path, absl::StrFormat("%d of %d data bytes (%s)", bytes.size(), count, code != Z_OK ? zerror : "truncated"));
  }
  unsigned char extra;
  if (gzread(file, &extra, 1) != 0) return Malformed(path, "trailing bytes after the data");
  return bytes;
}

absl::StatusOr<TensorData> Read(const std::string& path) {
  int64_t file_size = 0;
  absl::StatusOr<int> fd = OpenRegular(path, &file_size);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<gzFile_s, GzCloser> file(gzdopen(*fd, "rb"));  // owns fd from here on
  if (file == nullptr) {
    close(*fd);
    return absl::ResourceExhaustedError(absl::StrCat("cannot open ", path, ": zlib is out of memory"));
  }
  const absl::StatusOr<Dims> dims = ReadHeader(file.get(), path);
  if (!dims.ok()) return dims.status();
  int64_t count = 1;
  for (int64_t d : *dims) count *= d;
  const int64_t header_bytes = 4 + 4 * static_cast<int64_t>(dims->size());
  const absl::StatusOr<std::vector<unsigned char>> bytes = ReadData(file.get(), path, count, file_size, header_bytes);
  if (!bytes.ok()) return bytes.status();
  TensorData out(Shape(*dims), DType::kI32);
  auto values = out.mutable_values<int32_t>();
  for (int64_t i = 0; i < count; ++i) values[i] = (*bytes)[i];
  return out;
}

}  // namespace

absl::StatusOr<TensorData> ReadIdx(const std::string& path) {
  // A file that really holds 2^31 bytes needs 10 GiB here (bytes, then i32 values); a machine
  // without them gets a status, not an abort.
  try {
    return Read(path);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("not enough memory to read ", path));
  }
}

absl::StatusOr<LabeledImages> LoadFashionMnist(const std::string& dir, const std::string& split) {
  if (split != "train" && split != "t10k") {
    return absl::InvalidArgumentError(absl::StrCat("split must be train or t10k, got ", split));
  }
  const std::string images_path = absl::StrCat(dir, "/", split, "-images-idx3-ubyte.gz");
  const std::string labels_path = absl::StrCat(dir, "/", split, "-labels-idx1-ubyte.gz");
  absl::StatusOr<TensorData> images = ReadIdx(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<TensorData> labels = ReadIdx(labels_path);
  if (!labels.ok()) return labels.status();
  if (images->shape().rank() != 3 || images->shape()[1] != 28 || images->shape()[2] != 28) {
    return Malformed(images_path, absl::StrCat("images are ", images->shape().ToString(), ", not [N,28,28]"));
  }
  if (labels->shape().rank() != 1 || labels->shape()[0] != images->shape()[0]) {
    return Malformed(labels_path,
                     absl::StrFormat("%s labels for %d images", labels->shape().ToString(), images->shape()[0]));
  }
  // Fashion-MNIST's training-set pixel statistics (on a 0..1 scale).
  constexpr double kMean = 0.2860, kStd = 0.3530;
  LabeledImages out{TensorData(images->shape(), DType::kF32), TensorData(labels->shape(), DType::kI64)};
  auto px = images->values<int32_t>();
  auto dst = out.images.mutable_values<float>();
  for (size_t i = 0; i < px.size(); ++i) dst[i] = static_cast<float>((px[i] / 255.0 - kMean) / kStd);
  auto ids = labels->values<int32_t>();
  auto lab = out.labels.mutable_values<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] > 9) return Malformed(labels_path, absl::StrFormat("label %d at %d is not 0..9", ids[i], i));
    lab[i] = ids[i];
  }
  return out;
}

}  // namespace kiln::data
