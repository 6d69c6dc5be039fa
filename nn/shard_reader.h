// Reading a sharded checkpoint onto any world size: the chunks one member of M needs, read
// from the N source files chunk by chunk (only the source chunks that overlap its range, each
// verified against the index's CRC-32C), so no member loads the whole model unless M == 1.
#ifndef KILN_NN_SHARD_READER_H_
#define KILN_NN_SHARD_READER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "nn/shard_index.h"
#include "tensor/tensor_data.h"

namespace kiln::nn {

struct ReadShardOptions {
  bool parameters_only = false;                            // leave out the optimizer slots
  std::function<void(const std::string& name)> on_tensor;  // after each tensor (progress)
};

// Every tensor of the checkpoint in `dir` (described by `index`, from ReadShardIndex) as
// member `member` of a world of `world` holds it under the shard layout (shard_layout.h): a
// 1-D tensor of ShardChunkSize(numel, world) elements, zeros beyond the tensor's end; for
// world == 1 the whole tensor in its shape. Every listed file is checked to be there with its
// recorded size first (so every member meets the same error), then each file read is checked
// against the index (its tensors, shapes and dtypes) and each chunk read against its CRC-32C.
// Errors name the file: NotFound for a missing one, DataLoss for a changed or damaged one.
absl::StatusOr<std::map<std::string, TensorData>> ReadShard(const std::string& dir, const ShardIndex& index,
                                                            int64_t world, int64_t member,
                                                            const ReadShardOptions& options = {});

}  // namespace kiln::nn

#endif  // KILN_NN_SHARD_READER_H_
