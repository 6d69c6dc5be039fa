#include "examples/shard_flag.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, shard, "none",
          "none, optimizer or gradients: what data parallelism splits over the devices (ZeRO-1, ZeRO-2)");

namespace kiln {

absl::StatusOr<distributed::Sharding> ParseShardFlag(const std::string& value) {
  const absl::StatusOr<distributed::Sharding> s = distributed::ParseSharding(value);
  if (s.ok() && *s == distributed::Sharding::kParameters) {
    return absl::InvalidArgumentError(
        "--shard=parameters: sharding the parameters (ZeRO-3) is not built yet; use none, optimizer or gradients");
  }
  if (!s.ok())
    return absl::InvalidArgumentError(absl::StrCat("--shard=", value, ": expected none, optimizer or gradients"));
  return s;
}

absl::StatusOr<distributed::Sharding> ShardingFromFlag() { return ParseShardFlag(absl::GetFlag(FLAGS_shard)); }

}  // namespace kiln
