// ReadIdx on any bytes, plain or gzip'd: a status naming the file, never a crash, and memory
// bounded by what the bytes hold. What parses has the claimed shape and byte values.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "data/idx.h"
#include "fuzz/memory_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const kiln::fuzz::MemoryFile input(data, size);
  const std::string path = input.path();
  const auto idx = kiln::data::ReadIdx(path);
  if (!idx.ok() && idx.status().message().find(path) == std::string::npos) std::abort();
  if (idx.ok()) {
    if (idx->dtype() != kiln::DType::kI32 || idx->shape().rank() < 1 || idx->numel() < 1) std::abort();
    for (int32_t v : idx->values<int32_t>()) {
      if (v < 0 || v > 255) std::abort();
    }
  }
  return 0;
}
