// One collective call as a device group's engine receives it: which collective, with which
// reduction or root, and its signature. Signatures are built here, once for every engine:
// members compare them when they meet, and processes compare them (with the local member
// count) before any data moves, so they must be the same bytes on every backend and rank.
#ifndef KILN_DISTRIBUTED_COLLECTIVE_CALL_H_
#define KILN_DISTRIBUTED_COLLECTIVE_CALL_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "distributed/collective.h"
#include "distributed/collective_checks.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace kiln::distributed {

class FlightRecorder;

struct CollectiveCall {
  Collective collective;
  ReduceOp op = ReduceOp::kSum;  // all-reduce and reduce-scatter
  int root = 0;                  // broadcast: a global member
  std::string signature;         // "all_reduce(sum) 'step 3 bucket 0' of f32[4]"
  // Where the front end recorded the call (flight_recorder.h); null when the recorder is off.
  FlightRecorder* recorder = nullptr;
  int member = 0;
  uint64_t seq = 0;

  // An engine calls this once the local members have met and data starts to move (the
  // flight recorder's start time; flight_recorder.cc).
  void Started() const;

  // "all_reduce(sum)", "broadcast(root 1)", "all_gather", "reduce_scatter(mean)".
  static std::string Name(Collective collective, ReduceOp op, int root) {
    const char* name = CollectiveName(collective);
    switch (collective) {
      case Collective::kAllReduce:
      case Collective::kReduceScatter: return absl::StrCat(name, "(", OpName(op), ")");
      case Collective::kBroadcast: return absl::StrCat(name, "(root ", root, ")");
      default: return name;
    }
  }
  // What the processes compare: the signature and how many members each process has.
  std::string AcrossProcesses(int local_members) const {
    return absl::StrCat(signature, " on ", local_members, " local device(s)");
  }
};

// The call of `collective` on t (each member's tensor has t's shape and dtype), named `tag`.
template <Backend B>
CollectiveCall MakeCall(Collective collective, ReduceOp op, int root, const Tensor<B>& t, absl::string_view tag) {
  return {collective, op, root, absl::StrCat(CollectiveCall::Name(collective, op, root), Describe(t, tag))};
}

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_COLLECTIVE_CALL_H_
