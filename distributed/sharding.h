// Sharding: how much of the model state data parallelism splits over the members of a group
// instead of copying to each (ZeRO's stages): nothing (DDP), the optimizer state and its
// update (ZeRO-1), the gradients too (ZeRO-2), the parameters too (ZeRO-3 / FSDP).
#ifndef KILN_DISTRIBUTED_SHARDING_H_
#define KILN_DISTRIBUTED_SHARDING_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tensor/dtype.h"

namespace kiln::distributed {

enum class Sharding {
  kNone,        // every member holds and updates the whole model (DDP)
  kOptimizer,   // gradients all-reduced; each member updates its shard, shards all-gathered
  kGradients,   // gradients reduce-scattered during backward: each member keeps its shard
  kParameters,  // parameters live sharded, gathered around each unit's forward and backward
};

// How ZeRO-3 handles a unit's parameters (distributed/sharded_parameters.h).
struct ParameterShardingOptions {
  // Free a unit's gathered parameters after its forward and gather them again for its
  // backward (recomputing its forward): the least memory. Off: the graph keeps what the
  // forward used until backward frees it (one gather per unit and step, no recompute).
  bool reshard_after_forward = true;
  // Queue the next unit's gather (in forward, then backward order) while this one computes.
  bool prefetch = true;
  // The dtype the step's gathers travel in, when not the parameters' own: kBF16 halves the
  // bytes of f32 parameters (the members keep f32 master chunks). Each member's forward and
  // backward then see its parameters rounded to it, which changes nothing where they enter
  // their matmuls in that dtype anyway (a compute dtype, nn/precision.h), and rounds them
  // where they do not (norms), as FSDP's param_dtype does. GatherParameters stays exact.
  std::optional<DType> gather_dtype;
};

// "none", "optimizer", "gradients", "parameters": the names flags and checkpoints use.
inline const char* ShardingName(Sharding s) {
  switch (s) {
    case Sharding::kNone: return "none";
    case Sharding::kOptimizer: return "optimizer";
    case Sharding::kGradients: return "gradients";
    case Sharding::kParameters: return "parameters";
  }
  return "?";
}

inline absl::StatusOr<Sharding> ParseSharding(absl::string_view name) {
  for (Sharding s : {Sharding::kNone, Sharding::kOptimizer, Sharding::kGradients, Sharding::kParameters}) {
    if (name == ShardingName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("sharding '", name, "' is none of none, optimizer, gradients, parameters"));
}

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_SHARDING_H_
