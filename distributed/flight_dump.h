// The flight recorder's file format: what one process writes about one device group's last
// calls when a collective fails (flight_recorder.h), and what tools/flight_recorder reads back.
// JSON, one call per line, so a dump reads with grep as well as with the tool. The same format,
// with only each member's last call, is the note a rank leaves its peers on a failure.
//
//   {"format": "kiln-flight-recorder 1", "group": 0, "rank": 1, "world_size": 2, "members": 1,
//    "capacity": 2048, "dumped_us": ..., "reason": "...", "diagnosis": "...", "entries": [
//   {"member": 0, "seq": 1403, "op": "all_reduce(mean)", "tag": "step 187 bucket 0", "dtype": "f32",
//    "shape": [269322], "enqueued_us": ..., "started_us": ..., "ended_us": ..., "state": "completed"},
//   ...]}
//
// Times are microseconds of the system clock (comparable across the machines of a run as far
// as their clocks agree); 0 is "not yet". A member's global index is rank * members + member.
#ifndef KILN_DISTRIBUTED_FLIGHT_DUMP_H_
#define KILN_DISTRIBUTED_FLIGHT_DUMP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::distributed {

inline constexpr char kFlightDumpFormat[] = "kiln-flight-recorder 1";
// Bounds a reader holds a dump to (a writer stays within them).
inline constexpr int kMaxFlightWorldSize = 65536;
inline constexpr int kMaxFlightMembers = 1024;
inline constexpr int kMaxFlightCapacity = 1 << 20;
inline constexpr size_t kMaxFlightText = 4096;  // a tag, a reason, an error
inline constexpr int kMaxFlightRank = 32;       // dims of a shape

struct FlightDumpEntry {
  int member = 0;
  uint64_t seq = 0;
  std::string op;     // "all_reduce(sum)", "broadcast(root 1)", "all_gather", ...
  std::string tag;    // the caller's, may be empty
  std::string dtype;  // "f32"
  std::vector<int64_t> shape;
  int64_t enqueued_us = 0, started_us = 0, ended_us = 0;
  std::string state;  // "entered", "started", "completed", "failed"
  std::string error;  // a failed call's status
};

struct FlightDump {
  int group = 0;  // the device group's number in its process, in order of creation
  int rank = 0, world_size = 1, members = 1;
  int capacity = 0;  // calls kept per member
  int64_t dumped_us = 0;
  std::string reason;                    // the failure that made the dump
  std::string diagnosis;                 // who is behind, as the failing rank saw it
  std::vector<FlightDumpEntry> entries;  // by member, oldest first
};

// "'step 3 bucket 0'" for a tagged call, "all_reduce(sum) of f32[4]" otherwise.
std::string FlightCallName(const FlightDumpEntry& e);
// "all_reduce(sum) 'step 3 bucket 0' of f32[4]": as the call's signature (collective_call.h).
std::string FlightSignature(const FlightDumpEntry& e);
// The same from its texts; `dims` as "2,3".
std::string FlightSignature(absl::string_view op, absl::string_view tag, absl::string_view dtype,
                            absl::string_view dims);
// "f32[2,3]".
std::string FlightTensorName(const FlightDumpEntry& e);

std::string FlightDumpToJson(const FlightDump& dump);

// InvalidArgument naming the first thing that is not a dump within the bounds above (a dump
// of any size streams through ReadFlightDump, flight_dump_reader.h, instead).
absl::StatusOr<FlightDump> ParseFlightDump(absl::string_view text);

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_FLIGHT_DUMP_H_
