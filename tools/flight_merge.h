// tools/flight_recorder's work, apart from files: the ranks' flight recorder dumps
// (distributed/flight_dump.h) merged into one timeline per device group, and the first
// sequence number at which the ranks' calls diverge (different op, tag, dtype or shape, or a
// call some member never made), ending with one JSON line.
//
// Dumps stream in (flight_dump_reader.h) and each call is kept in 56 bytes, its texts interned
// (flight_strings.h), so the merge needs well under the dumps' size in memory; the report goes
// out line by line.
#ifndef KILN_TOOLS_FLIGHT_MERGE_H_
#define KILN_TOOLS_FLIGHT_MERGE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "distributed/flight_dump_reader.h"
#include "tools/flight_strings.h"

namespace kiln::tools {

class FlightMerge {
 public:
  // The most members (ranks' dumps times members each) one merge takes: the divergence line
  // names every member of a group.
  static constexpr int kMaxMembers = 65536;

  // Reads one dump from `read`. InvalidArgument "<file>: ..." for one that is not a dump
  // ("not a flight recorder dump: ..."), does not fit the others of its group (another world
  // size or member count, a rank twice) or has a member's sequence number twice; then nothing
  // of it is kept.
  absl::Status Add(const std::string& file, distributed::FlightDumpSource read);

  // The report of the dumps added, to `out` a piece at a time (the last `tail` lines of each
  // timeline, all of them when tail <= 0). Texts from the dumps are shown with control bytes
  // and backslashes escaped (\x1b, \\): a dump cannot move the terminal's cursor or fake a line.
  void Write(int tail, absl::FunctionRef<void(absl::string_view)> out) const;

 private:
  // One call, its texts as FlightStrings ids.
  struct Call {
    uint64_t seq;
    int64_t enqueued_us, started_us, ended_us;
    uint32_t op, tag, dtype, dims, error;
    uint16_t member;
    uint8_t state;
  };
  static_assert(sizeof(Call) == 56, "the size this header and the tool's --help state");
  struct Dump {
    std::string file, diagnosis;
    int group, rank, world_size, members;
    size_t begin, end;  // its calls in calls_, by member, then seq
  };
  struct Member;
  struct Divergence;

  // One call of the dump being added, its texts interned; `dims` is room for its shape's text.
  absl::Status AddCall(const distributed::FlightDumpEntry& e, std::string& dims);
  // Why dump `d` cannot join the others (too many members in all, its group's size or its
  // rank at odds with theirs); OK when it can.
  absl::Status CheckJoins(const distributed::FlightDump& d) const;
  // Sorts calls_ from `begin` by member, then seq; why not when a member has a seq twice.
  absl::Status SortCalls(size_t begin);
  std::string Signature(const Call& c) const;
  bool SameCall(const Call& a, const Call& b) const;
  static std::string MemberName(const Member& m, int per_rank);
  // Each dump's members, with their calls' range in calls_.
  std::vector<Member> MembersOf(const std::vector<const Dump*>& dumps) const;
  // The first seq from `start` where the members' calls differ; nullopt when none does.
  std::optional<Divergence> FirstDivergence(const std::vector<Member>& members, int per_rank, uint64_t start) const;
  // Who made which call at `seq`, member i's next call being calls_[at[i]].
  Divergence DivergenceAt(const std::vector<Member>& members, int per_rank, const std::vector<size_t>& at,
                          uint64_t seq) const;
  void WriteTimeline(const std::vector<const Dump*>& dumps, const std::vector<Member>& members, int per_rank, int tail,
                     absl::FunctionRef<void(absl::string_view)> out) const;
  // A group's head, timeline, verdict line, and its part of the JSON summary.
  void WriteGroup(int id, const std::vector<const Dump*>& ranks, int tail,
                  absl::FunctionRef<void(absl::string_view)> out, std::string* summary) const;

  FlightStrings strings_;
  std::deque<Call> calls_;  // grows without moving (no peak of twice the calls)
  std::vector<Dump> dumps_;
  int members_ = 0;
};

}  // namespace kiln::tools

#endif  // KILN_TOOLS_FLIGHT_MERGE_H_
