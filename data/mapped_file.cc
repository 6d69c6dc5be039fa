#include "data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace kiln::data {

absl::StatusOr<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; nothing changes for files.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int error = errno;
    close(fd);
    if (S_ISDIR(st.st_mode))
      return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file (a folder)"));
    if (error != 0 && st.st_mode == 0) return absl::ErrnoToStatus(error, absl::StrCat("cannot inspect ", path));
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* mapped = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) {
      const int error = errno;
      close(fd);
      return absl::ErrnoToStatus(error, absl::StrCat("cannot map ", path));
    }
    data = static_cast<const uint8_t*>(mapped);
  }
  close(fd);  // the mapping keeps the file
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (size_ > 0) munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::AdviseSequential() const {
  if (size_ > 0) madvise(const_cast<uint8_t*>(data_), size_, MADV_SEQUENTIAL);
}

void MappedFile::AdviseRandom() const {
  if (size_ > 0) madvise(const_cast<uint8_t*>(data_), size_, MADV_RANDOM);
}

}  // namespace kiln::data
