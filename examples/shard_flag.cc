#include "examples/shard_flag.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, shard, "none",
          "none, optimizer, gradients or parameters: what data parallelism splits over the devices "
          "(ZeRO-1, ZeRO-2, ZeRO-3)");

namespace kiln {

absl::StatusOr<distributed::Sharding> ParseShardFlag(const std::string& value) {
  const absl::StatusOr<distributed::Sharding> s = distributed::ParseSharding(value);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard=", value, ": expected none, optimizer, gradients or parameters"));
  }
  return s;
}

absl::StatusOr<distributed::Sharding> ShardingFromFlag() { return ParseShardFlag(absl::GetFlag(FLAGS_shard)); }

}  // namespace kiln
