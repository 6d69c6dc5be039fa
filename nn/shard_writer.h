// Writing a sharded checkpoint (docs/sharded_checkpoints.md) without a gather: each process
// writes the files of its own members, one per global member, then rank 0 writes the index,
// which makes the folder a complete checkpoint. Between the two the caller agrees that every
// file is written (a barrier) and hands rank 0 every file's ShardFileInfo: exchanged (they are
// small), or read back from the files with DescribeShardFile.
#ifndef KILN_NN_SHARD_WRITER_H_
#define KILN_NN_SHARD_WRITER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nn/shard_index.h"
#include "tensor/tensor_data.h"

namespace kiln::nn {

// One member's chunks: every tensor of the plan, by name, as a 1-D tensor of
// ShardChunkSize(numel, world) elements with the plan's dtype (its padding is written as it
// is, and read back as zeros).
using MemberChunks = std::map<std::string, TensorData>;

// Writes shard-<g>-of-<world>.safetensors in `dir` for each local member g (creating `dir` if
// its parent exists), atomically (a fresh temporary file renamed into place). A file of an
// interrupted write (no index yet) is replaced; a folder that has an index already is refused
// (AlreadyExists), as is a `dir` that is a link. InvalidArgument for chunks that do not fit
// the plan. Returns the files' descriptions, in member order.
absl::StatusOr<std::vector<ShardFileInfo>> WriteShardFiles(const std::string& dir, const ShardPlan& plan,
                                                           const std::map<int64_t, MemberChunks>& local);

// The description of member `member`'s file in `dir` read back from the file (its header,
// and one pass over its bytes for the checksums): for rank 0 to learn other processes' files.
absl::StatusOr<ShardFileInfo> DescribeShardFile(const std::string& dir, int64_t member, int64_t world);

// Writes `dir`/index.json for `plan` and every member's file (`files`, in any order), after
// checking that they cover the plan (CheckShardCoverage) and that each file is there with the
// size described. Never replaces an index (AlreadyExists).
absl::Status WriteShardIndex(const std::string& dir, const ShardPlan& plan, std::vector<ShardFileInfo> files);

}  // namespace kiln::nn

#endif  // KILN_NN_SHARD_WRITER_H_
