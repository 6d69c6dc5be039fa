// The index of a sharded checkpoint (docs/sharded_checkpoints.md): one JSON file, index.json,
// that rank 0 writes last, so that a folder is a complete checkpoint exactly when it has one.
// It records the layout (world size, stage), every tensor's full shape and dtype, and for each
// member the file that holds its chunks, with the file's size and CRC-32C and each chunk's
// CRC-32C (so a reader that reads only some chunks still verifies what it reads).
#ifndef KILN_NN_SHARD_INDEX_H_
#define KILN_NN_SHARD_INDEX_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace kiln::nn {

inline constexpr char kShardIndexFormat[] = "kiln-sharded-checkpoint/1";
inline constexpr char kShardIndexFile[] = "index.json";
inline constexpr char kShardFileFormat[] = "kiln-shard/1";  // each shard file's metadata "format"

// The stages a checkpoint may record, as --shard names them.
inline constexpr const char* kShardStages[] = {"none", "optimizer", "gradients", "parameters"};

struct ShardedTensor {
  Shape shape;  // the full tensor's
  DType dtype;
};

// What every member agrees on before writing. Tensor names: parameters under their module
// paths (no '/'), optimizer slots as nn::Optimizer's State names them, "<slot>/<path>", where
// <path> is a parameter of the same plan.
struct ShardPlan {
  int64_t world = 1;  // global members N
  std::string stage = "none";
  std::map<std::string, std::string> metadata;  // the caller's: step, run, streams, ...
  std::map<std::string, ShardedTensor> tensors;
};

// One member's file, as its writer describes it.
struct ShardFileInfo {
  int64_t member = 0;
  std::string file;  // its name in the checkpoint folder: ShardFileName(member, world)
  uint64_t bytes = 0;
  uint32_t crc32c = 0;                           // of the whole file
  std::map<std::string, uint32_t> chunk_crc32c;  // of each tensor's chunk, c elements
};

struct ShardIndex {
  ShardPlan plan;
  std::vector<ShardFileInfo> files;  // one per member, in member order
};

// "shard-<member>-of-<world>.safetensors".
std::string ShardFileName(int64_t member, int64_t world);

// A tensor name that holds an optimizer slot ("<slot>/<path>"): its parameter's path.
absl::string_view ParameterOf(absl::string_view name);
inline bool IsOptimizerSlot(absl::string_view name) { return ParameterOf(name) != name; }

// The plan is sound: 1 <= world <= kMaxShardMembers, a known stage, names as above, each
// tensor under 2^62 elements. InvalidArgument naming `what` and the first problem.
absl::Status CheckShardPlan(const ShardPlan& plan, const std::string& what);

// The files cover the plan: one per member 0..world-1, each under its own name, each with the
// CRC of a chunk of every tensor and of no other. InvalidArgument naming `what` otherwise.
absl::Status CheckShardCoverage(const ShardIndex& index, const std::string& what);

// The index as JSON; InvalidArgument for a name or metadata string that is not UTF-8.
absl::StatusOr<std::string> SerializeShardIndex(const ShardIndex& index);

// The index in `text` (read from `path`, which errors name): DataLoss for text that is no
// index of this format, InvalidArgument for one whose plan or coverage is unsound
// (CheckShardPlan, CheckShardCoverage). Never throws, whatever the bytes.
absl::StatusOr<ShardIndex> ParseShardIndex(absl::string_view text, const std::string& path);

// The index of the checkpoint folder `dir`: NotFound when it has none (an incomplete
// checkpoint: its writers were interrupted before rank 0 wrote the index).
absl::StatusOr<ShardIndex> ReadShardIndex(const std::string& dir);

}  // namespace kiln::nn

#endif  // KILN_NN_SHARD_INDEX_H_
