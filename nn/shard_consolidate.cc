#include "nn/shard_consolidate.h"

#include <sys/stat.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "nn/file_io.h"
#include "nn/safetensors.h"
#include "nn/shard_index.h"
#include "nn/shard_reader.h"

namespace kiln::nn {

absl::StatusOr<ConsolidatedModel> ConsolidateShardedCheckpoint(
    const std::string& dir, const std::string& out,
    const std::function<void(const std::string& name, int64_t done, int64_t total)>& progress) {
  // Refused before anything is read: an existing file, or a place that cannot be written.
  struct stat st;
  if (lstat(out.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(out, " exists already, and nothing is overwritten"));
  }
  if (absl::Status s = CheckWritableFile(out); !s.ok()) return s;
  absl::StatusOr<ShardIndex> index = ReadShardIndex(dir);
  if (!index.ok()) return index.status();
  int64_t total = 0, done = 0;
  for (const auto& [name, tensor] : index->plan.tensors) total += IsOptimizerSlot(name) ? 0 : 1;
  ReadShardOptions options{.parameters_only = true};
  options.on_tensor = [&](const std::string& name) {
    if (progress) progress(name, ++done, total);
  };
  absl::StatusOr<std::map<std::string, TensorData>> tensors = ReadShard(dir, *index, 1, 0, options);
  if (!tensors.ok()) return tensors.status();
  absl::StatusOr<std::string> header = EncodeSafetensorsHeader(out, *tensors, {{"format", "pt"}});
  if (!header.ok()) return header.status();
  ConsolidatedModel model{index->plan.world, index->plan.stage, static_cast<int64_t>(tensors->size()), 0,
                          header->size()};
  std::vector<absl::string_view> pieces = {*header};
  for (const auto& [name, data] : *tensors) {
    pieces.emplace_back(static_cast<const char*>(data.raw()), static_cast<size_t>(data.nbytes()));
    model.elements += data.numel();
    model.bytes += data.nbytes();
  }
  if (absl::Status s = WriteNewFileAtomically(out, pieces); !s.ok()) return s;
  return model;
}

}  // namespace kiln::nn
