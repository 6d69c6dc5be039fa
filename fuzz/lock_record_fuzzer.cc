// A checkpoint folder's lock record (nn/checkpoint_lock.h) on any bytes: the file is written
// by whoever held the folder, so it comes from outside. What parses writes back to the same
// bytes, within the stated bounds.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "nn/checkpoint_lock.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto record = kiln::nn::ParseLockRecord(text);
  if (!record) return 0;
  if (record->pid < 1 || record->host.empty() || record->host.size() > 255 || record->run.empty() ||
      record->run.size() > 64 || record->since < 0) {
    std::abort();
  }
  if (kiln::nn::FormatLockRecord(*record) != text) std::abort();
  return 0;
}
