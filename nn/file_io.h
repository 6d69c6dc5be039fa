// Files as the error policy wants them: read only from regular files (a FIFO would hang, a
// device would never end), and written atomically through a fresh temporary file under a
// random name, so that a link someone planted can never redirect the write.
#ifndef KILN_NN_FILE_IO_H_
#define KILN_NN_FILE_IO_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kiln::nn {

// A regular file open for reading, with its size as it was when opened.
class InputFile {
 public:
  // NotFound for a missing file; FailedPrecondition "<path> is not a regular file (it is a
  // directory)" for a directory, FIFO, socket or device, refused without reading from it.
  static absl::StatusOr<InputFile> Open(const std::string& path);

  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&&) = delete;
  ~InputFile();

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Exactly `n` bytes at `offset`; DataLoss if the file ends first (it shrank while open).
  absl::Status ReadAt(uint64_t offset, void* out, uint64_t n) const;

 private:
  InputFile(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_;
  uint64_t size_;
};

// Writes the concatenation of `pieces` to `path`: into a new file beside it (O_EXCL and
// O_NOFOLLOW under a random name, mode 0644 before the umask), flushed to disk, renamed onto
// `path`, and the directory synced. On any failure the temporary file is removed and the old
// file at `path` is untouched. A link at `path` is replaced, never written through.
absl::Status WriteFileAtomically(const std::string& path, absl::Span<const absl::string_view> pieces);

// WriteFileAtomically, but only where nothing is at `path`: AlreadyExists "<path> exists
// already, and nothing is overwritten" otherwise (a link there included), also when another
// writer gets there first (the final rename refuses to replace).
absl::Status WriteNewFileAtomically(const std::string& path, absl::Span<const absl::string_view> pieces);

// Whether WriteFileAtomically(path, ...) can succeed, checked by creating and removing a
// temporary file beside `path`: a missing or unwritable directory, or a path that is a
// directory, FIFO or device, is an error naming it. Leaves nothing behind.
absl::Status CheckWritableFile(const std::string& path);

}  // namespace kiln::nn

#endif  // KILN_NN_FILE_IO_H_
