// The one name of a collective, shared by the groups (what a group is made for), the engines
// (what a call asks of them), NCCL (which call it issues) and the flight recorder (what its
// dumps name), beside the reduction it may take (ReduceOp, tensor/ops.h). Its own small
// target, so that an engine's folder and the tools depend on it without the groups.
#ifndef KILN_DISTRIBUTED_COLLECTIVE_H_
#define KILN_DISTRIBUTED_COLLECTIVE_H_

namespace kiln::distributed {

// kGradientSync is a group's use, not a call: the all-reduces of gradient buckets
// (gradient_sync.h), named apart in the errors of the group made for them. Engines and NCCL
// are only asked the other four.
enum class Collective { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kGradientSync };

// "all_reduce", "broadcast", "all_gather", "reduce_scatter", "gradient sync": the first
// word of every error, signature and flight-recorder entry about it (dumps store these bytes).
constexpr const char* CollectiveName(Collective collective) {
  switch (collective) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kGradientSync: return "gradient sync";
  }
  return "?";
}

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_COLLECTIVE_H_
