// The settings that change a run's math (flags, hyper-parameters, sizes), compared across
// every rank of a process group before the first step: ranks started with different flags
// would otherwise train on, each its own way, and some even report a result.
#ifndef KILN_DISTRIBUTED_PROCESS_SETTINGS_AGREEMENT_H_
#define KILN_DISTRIBUTED_PROCESS_SETTINGS_AGREEMENT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "distributed/process/process_group.h"

namespace kiln::distributed {

using Settings = std::vector<std::pair<std::string, std::string>>;  // (name, value)

// One collective (every rank must call it): OK when every rank has the same settings;
// otherwise InvalidArgument on every rank alike, naming the first rank that differs from
// rank 0 and each setting that differs with both values, e.g.
//   "ranks disagree on the run's settings: rank 1 has --batch_size=32 but rank 0 has
//    --batch_size=64; start every rank with the same flags"
// Values are compared whole; messages show each cut to 100 bytes.
absl::Status AgreeOnSettings(ProcessGroup& group, const Settings& settings);

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_PROCESS_SETTINGS_AGREEMENT_H_
