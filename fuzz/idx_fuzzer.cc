// ReadIdx on any bytes, plain or gzip'd: a status naming the file, never a crash, and memory
// bounded by what the bytes hold. What parses has the claimed shape and byte values.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "data/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A memfd is a regular file that lives in memory: no disk, nothing to clean up.
  const int fd = memfd_create("idx_fuzzer", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const auto idx = kiln::data::ReadIdx(path);
  if (!idx.ok() && idx.status().message().find(path) == std::string::npos) std::abort();
  if (idx.ok()) {
    if (idx->dtype() != kiln::DType::kI32 || idx->shape().rank() < 1 || idx->numel() < 1) std::abort();
    for (int32_t v : idx->values<int32_t>()) {
      if (v < 0 || v > 255) std::abort();
    }
  }
  close(fd);
  return 0;
}
