// A regular file mapped read-only into memory: the kernel pages it in as it is read and may drop
// those pages again, so a file larger than memory can be used without reading it whole.
#ifndef KILN_DATA_MAPPED_FILE_H_
#define KILN_DATA_MAPPED_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kiln::data {

class MappedFile {
 public:
  // NotFound "cannot open <path>: ..." for a missing file (and the errno's text for any other
  // failure to open); FailedPrecondition "<path> is not a regular file" for a folder, FIFO or
  // device, refused without reading it. An empty file maps to no bytes.
  static absl::StatusOr<std::shared_ptr<const MappedFile>> Open(const std::string& path);
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  absl::Span<const uint8_t> bytes() const { return {data_, size_}; }
  // Hints the kernel about the coming reads: sequential (read ahead) or random (read no more than
  // each page touched, as sampling does).
  void AdviseSequential() const;
  void AdviseRandom() const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size) : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace kiln::data

#endif  // KILN_DATA_MAPPED_FILE_H_
