// --shard=none|optimizer|gradients, shared by examples/train and examples/gpt: what data
// parallelism splits over the devices instead of copying to each (distributed/sharding.h).
// It does not change the math, so a checkpoint resumes under any stage; every rank must pass
// the same one (DataParallel checks).
#ifndef KILN_EXAMPLES_SHARD_FLAG_H_
#define KILN_EXAMPLES_SHARD_FLAG_H_

#include <string>

#include "absl/status/statusor.h"
#include "distributed/sharding.h"

namespace kiln {

// The flag's current value, checked (InvalidArgument naming the flag and the value).
absl::StatusOr<distributed::Sharding> ShardingFromFlag();
absl::StatusOr<distributed::Sharding> ParseShardFlag(const std::string& value);

}  // namespace kiln

#endif  // KILN_EXAMPLES_SHARD_FLAG_H_
