// ParseShardIndex on any bytes: a status naming the file, never a crash; an index it accepts
// covers its plan, and serialises to text that parses back to the same index.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "nn/shard_index.h"

namespace {

bool Same(const kiln::nn::ShardIndex& a, const kiln::nn::ShardIndex& b) {
  if (a.plan.world != b.plan.world || a.plan.stage != b.plan.stage || a.plan.metadata != b.plan.metadata ||
      a.plan.tensors.size() != b.plan.tensors.size() || a.files.size() != b.files.size()) {
    return false;
  }
  for (const auto& [name, t] : a.plan.tensors) {
    const auto it = b.plan.tensors.find(name);
    if (it == b.plan.tensors.end() || it->second.shape != t.shape || it->second.dtype != t.dtype) return false;
  }
  for (size_t i = 0; i < a.files.size(); ++i) {
    const auto &f = a.files[i], &g = b.files[i];
    if (f.member != g.member || f.file != g.file || f.bytes != g.bytes || f.crc32c != g.crc32c ||
        f.chunk_crc32c != g.chunk_crc32c) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/index.json";
  const auto index = kiln::nn::ParseShardIndex(std::string(reinterpret_cast<const char*>(data), size), path);
  if (!index.ok()) {
    if (index.status().message().find(path) == std::string::npos) std::abort();
    return 0;
  }
  if (!kiln::nn::CheckShardCoverage(*index, path).ok()) std::abort();
  const auto text = kiln::nn::SerializeShardIndex(*index);
  if (!text.ok()) return 0;  // a name that is not UTF-8: refused on writing, as the writer would
  const auto again = kiln::nn::ParseShardIndex(*text, path);
  if (!again.ok() || !Same(*index, *again)) std::abort();
  return 0;
}
