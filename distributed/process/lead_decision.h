// A decision only rank 0 may make (taking a lock, choosing the checkpoint to resume from),
// made once and handed to every rank: the others never decide on their own and so can never
// disagree with it. An error rank 0 meets is every rank's error, so all of them stop alike.
#ifndef KILN_DISTRIBUTED_PROCESS_LEAD_DECISION_H_
#define KILN_DISTRIBUTED_PROCESS_LEAD_DECISION_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "distributed/process/process_group.h"

namespace kiln::distributed {

// One collective (every rank calls it; `group` may be null for a single process): rank 0 runs
// `decide`, and every rank returns its result, an error with its code and message. A decision
// of more than kMaxDecisionBytes is an error. A failed broadcast is that failure's status.
inline constexpr int64_t kMaxDecisionBytes = 1 << 20;
absl::StatusOr<std::string> DecidedByLead(ProcessGroup* group,
                                          const std::function<absl::StatusOr<std::string>()>& decide);

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_PROCESS_LEAD_DECISION_H_
