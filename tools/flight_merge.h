// tools/flight_recorder's work, apart from files: the ranks' flight recorder dumps
// (distributed/flight_dump.h) merged into one timeline per device group, and the first
// sequence number at which the ranks' calls diverge (different op, tag, dtype or shape, or a
// call some member never made), ending with one JSON line.
#ifndef KILN_TOOLS_FLIGHT_MERGE_H_
#define KILN_TOOLS_FLIGHT_MERGE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distributed/flight_dump.h"

namespace kiln::tools {

struct NamedDump {
  std::string file;  // for messages
  distributed::FlightDump dump;
};

// The report (the last `tail` lines of each timeline, all of them when tail <= 0).
// InvalidArgument naming the file of a dump that does not fit the others of its group (another
// world size or member count, a rank twice, a member's sequence number twice).
absl::StatusOr<std::string> MergeFlightDumps(const std::vector<NamedDump>& dumps, int tail);

}  // namespace kiln::tools

#endif  // KILN_TOOLS_FLIGHT_MERGE_H_
