#include "examples/sharded_checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "distributed/process/lead_decision.h"
#include "nn/checkpoint.h"
#include "nn/shard_reader.h"
#include "tensor/crc32c.h"

namespace kiln {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

uint32_t MetadataCrc(const std::map<std::string, std::string>& metadata) {
  uint32_t crc = 0;
  for (const auto& [key, value] : metadata) {
    if (key == nn::kChecksumKey) continue;
    crc = Crc32c(Crc32c(crc, key), "", 1);  // a terminator after each string
    crc = Crc32c(Crc32c(crc, value), "", 1);
  }
  return crc;
}

std::string Shaped(DType dtype, const Shape& shape) { return absl::StrCat(DTypeName(dtype), shape.ToString()); }

// The slots each parameter has in the checkpoint, after checking every non-parameter tensor.
absl::StatusOr<std::map<std::string, int>> SlotsByParameter(const nn::ShardIndex& index, const std::string& path,
                                                            const std::map<std::string, Shape>& shapes,
                                                            const std::vector<std::string>& slots) {
  std::map<std::string, int> found;
  for (const auto& [name, tensor] : index.plan.tensors) {
    if (shapes.contains(name)) continue;
    const std::string param(nn::ParameterOf(name));
    const std::string slot = name.substr(0, name.size() - param.size() - 1);
    if (!nn::IsOptimizerSlot(name) || std::find(slots.begin(), slots.end(), slot) == slots.end()) {
      return absl::InvalidArgumentError(absl::StrCat(path, " has tensor ", name,
                                                     ", which is no parameter of the model nor one of its optimizer's "
                                                     "slots (",
                                                     absl::StrJoin(slots, ", "), ")"));
    }
    const auto it = shapes.find(param);
    if (it == shapes.end() || it->second != tensor.shape) {
      return absl::InvalidArgumentError(absl::StrCat(path, " has optimizer state ", name, " ", tensor.shape.ToString(),
                                                     ", which fits no parameter of the model"));
    }
    ++found[param];
  }
  return found;
}

}  // namespace

bool IsShardedCheckpoint(const std::string& path) {
  if (Exists(absl::StrCat(path, "/training_state.safetensors"))) return false;
  if (Exists(absl::StrCat(path, "/", nn::kShardIndexFile))) return true;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
    if (entry.path().filename().string().rfind("shard-", 0) == 0) return true;
  }
  return false;
}

void SealMetadata(std::map<std::string, std::string>& metadata) {
  metadata[nn::kChecksumKey] = absl::StrFormat("%08x", MetadataCrc(metadata));
}

absl::StatusOr<nn::ShardIndex> ReadShardedCheckpointIndex(const std::string& path) {
  absl::StatusOr<nn::ShardIndex> index = nn::ReadShardIndex(path);
  if (!index.ok()) return index.status();
  const auto& metadata = index->plan.metadata;
  const auto recorded = metadata.find(nn::kChecksumKey);
  const std::string computed = absl::StrFormat("%08x", MetadataCrc(metadata));
  if (recorded == metadata.end() || recorded->second != computed) {
    return absl::DataLossError(absl::StrCat(
        path, "/", nn::kShardIndexFile, ": its metadata was changed or damaged after it was written (crc32c ",
        recorded == metadata.end() ? "missing" : absl::StrCat("recorded ", recorded->second.substr(0, 16)),
        ", computed ", computed, ")"));
  }
  if (const auto run = metadata.find(nn::kRunKey); run == metadata.end() || run->second.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, "/", nn::kShardIndexFile, " does not name the run that wrote it"));
  }
  return index;
}

absl::StatusOr<nn::ShardIndex> VerifyShardedCheckpoint(const std::string& path) {
  absl::StatusOr<nn::ShardIndex> index = ReadShardedCheckpointIndex(path);
  if (!index.ok()) return index.status();
  for (const nn::ShardFileInfo& recorded : index->files) {
    const std::string file = absl::StrCat(path, "/", recorded.file);
    if (!Exists(file)) {
      return absl::NotFoundError(absl::StrCat(file, " is missing: the sharded checkpoint ", path,
                                              " is incomplete (its index lists the file)"));
    }
    absl::StatusOr<nn::ShardFileInfo> found = nn::DescribeShardFile(path, recorded.member, index->plan.world);
    if (!found.ok()) {
      return absl::DataLossError(
          absl::StrCat(file, " was changed or damaged after it was written: ", found.status().message()));
    }
    if (found->bytes != recorded.bytes || found->crc32c != recorded.crc32c) {
      return absl::DataLossError(absl::StrFormat(
          "%s was changed or damaged after it was written (%d bytes, crc32c %08x; its index records %d bytes, crc32c "
          "%08x)",
          file, found->bytes, found->crc32c, recorded.bytes, recorded.crc32c));
    }
  }
  return index;
}

absl::Status CheckShardedFits(const nn::ShardIndex& index, const std::string& path, const ParameterLayout& params,
                              const std::string& optimizer, const std::vector<std::string>& slots) {
  const auto& metadata = index.plan.metadata;
  if (const auto it = metadata.find("optimizer"); it == metadata.end() || it->second != optimizer) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds no state for optimizer ", optimizer,
                     it == metadata.end() ? "" : absl::StrCat(" (it has ", it->second, ")")));
  }
  std::map<std::string, Shape> shapes;
  for (const auto& [name, shape, dtype] : params) {
    shapes.emplace(name, shape);
    const auto it = index.plan.tensors.find(name);
    if (it == index.plan.tensors.end()) {
      return absl::NotFoundError(
          absl::StrCat(path, " has no tensor for parameter ", name, ": its shards do not cover the model"));
    }
    if (it->second.shape != shape || it->second.dtype != dtype) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": parameter ", name, " is ",
                                                     Shaped(it->second.dtype, it->second.shape),
                                                     ", but the model's is ", Shaped(dtype, shape)));
    }
  }
  absl::StatusOr<std::map<std::string, int>> found = SlotsByParameter(index, path, shapes, slots);
  if (!found.ok()) return found.status();
  const auto listed = metadata.find(nn::kStatelessKey);
  if (listed == metadata.end())
    return absl::InvalidArgumentError(absl::StrCat(path, ": the index has no ", nn::kStatelessKey));
  std::set<std::string> stateless;
  for (absl::string_view name : absl::StrSplit(listed->second, ',', absl::SkipEmpty())) stateless.emplace(name);
  for (const auto& [name, shape, dtype] : params) {
    const int n = found->contains(name) ? found->at(name) : 0;
    if (n != 0 && n != static_cast<int>(slots.size())) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": parameter ", name, " has ", n, " of the ", slots.size(),
                                                     " optimizer slots; it needs all of them or none"));
    }
    if (!slots.empty() && (n == 0) != stateless.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": parameter ", name,
                                                     n == 0 ? " has no optimizer state, and its writer did not list "
                                                              "it as never stepped"
                                                            : " has optimizer state but is listed as never stepped"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<nn::TrainingCheckpoint> ReadWholeCheckpoint(const std::string& path, const nn::ShardIndex& index) {
  absl::StatusOr<std::map<std::string, TensorData>> whole = nn::ReadShard(path, index, 1, 0);
  if (!whole.ok()) return whole.status();
  nn::TrainingCheckpoint c;
  c.model.metadata["format"] = "pt";
  c.state.metadata = index.plan.metadata;
  for (auto& [name, data] : *whole) {
    if (nn::IsOptimizerSlot(name)) {
      c.state.tensors.emplace(absl::StrCat(nn::kOptimizerPrefix, name), std::move(data));
    } else {
      c.model.tensors.emplace(name, std::move(data));
    }
  }
  return c;
}

absl::Status AgreeOnRanks(distributed::ProcessGroup* group, const absl::Status& mine, absl::string_view what) {
  if (group == nullptr || group->world_size() == 1) return mine;
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  // The first failing rank and its code, as rank * 32 + code (codes are below 17).
  int64_t first = mine.ok() ? kNone : int64_t{group->rank()} * 32 + static_cast<int64_t>(mine.code());
  if (absl::Status s = group->AllReduce(what, &first, &first, 1, DType::kI64, ReduceOp::kMin); !s.ok()) return s;
  if (first == kNone || !mine.ok()) return mine;
  return absl::Status(static_cast<absl::StatusCode>(first % 32),
                      absl::StrCat("rank ", first / 32, " failed ", what, " (its own error says why)"));
}

absl::Status WriteShardedCheckpoint(distributed::ProcessGroup* group, const std::string& dir, int64_t step, int keep,
                                    const std::string& run, const nn::ShardPlan& plan,
                                    const std::map<int64_t, nn::MemberChunks>& local) {
  const bool lead = group == nullptr || group->rank() == 0;
  absl::StatusOr<std::string> temp =
      distributed::DecidedByLead(group, [&] { return nn::NewCheckpointFolder(dir, step); });
  if (!temp.ok()) return temp.status();
  absl::StatusOr<std::vector<nn::ShardFileInfo>> mine = nn::WriteShardFiles(*temp, plan, local);
  if (absl::Status s = AgreeOnRanks(group, mine.status(), "writing its shard files"); !s.ok()) {
    std::error_code ignored;
    if (lead) std::filesystem::remove_all(*temp, ignored);
    return s;
  }
  // Rank 0, once every file is written: the index, then the folder in place.
  const auto complete = [&]() -> absl::Status {
    std::vector<nn::ShardFileInfo> files = *mine;
    for (int64_t g = 0; g < plan.world; ++g) {
      if (local.contains(g)) continue;
      absl::StatusOr<nn::ShardFileInfo> info = nn::DescribeShardFile(*temp, g, plan.world);
      if (!info.ok()) return info.status();
      files.push_back(*std::move(info));
    }
    if (absl::Status s = nn::WriteShardIndex(*temp, plan, std::move(files)); !s.ok()) return s;
    return nn::PlaceTrainingCheckpoint(dir, step, *temp, run);
  };
  absl::StatusOr<std::string> done = distributed::DecidedByLead(group, [&]() -> absl::StatusOr<std::string> {
    if (absl::Status s = complete(); !s.ok()) {
      std::error_code ignored;
      std::filesystem::remove_all(*temp, ignored);  // gone already if it was placed
      return s;
    }
    if (absl::Status pruned = nn::PruneTrainingCheckpoints(dir, keep, run); !pruned.ok()) {
      std::fprintf(stderr, "checkpoint: warning: %s (after writing step %lld)\n", std::string(pruned.message()).c_str(),
                   static_cast<long long>(step));
    }
    return std::string();
  });
  return done.status();
}

}  // namespace kiln
