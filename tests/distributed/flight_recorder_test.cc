// The flight recorder of an in-process group: a member that skips a collective and one that
// calls a different shape each give an error naming the members and their calls, and a dump
// holding every member's last calls; the ring keeps the last K calls; off, nothing changes.
#include "distributed/flight_recorder.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "distributed/device_group.h"
#include "distributed/flight_dump.h"
#include "tests/backends.h"

namespace kiln::distributed {
namespace {

using T = Tensor<Cpu>;
using ::kiln::testing::TestDevices;

std::string FreshDir() {
  static int n = 0;
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/flight-", n++);
}

FlightDump ReadDump(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  absl::StatusOr<FlightDump> dump = ParseFlightDump(s.str());
  EXPECT_TRUE(dump.ok()) << path << ": " << dump.status();
  return dump.ok() ? *dump : FlightDump{};
}

absl::Status Call(DeviceGroup<Cpu>& group, int member, int64_t n, const std::string& tag) {
  return group.AllReduce(member, T::ones({n}, DType::kF32, group.devices()[member]), ReduceOp::kSum, tag).status();
}

// Member 1 makes calls 0-3 and skips call 4: member 0 waits in it until the deadline, and the
// error says who is behind (member 1, after call 3) and where member 0 waits.
TEST(FlightRecorder, SkippedCollectiveNamesTheMemberAndBothCalls) {
  const auto d = TestDevices<Cpu>::Provide(2);
  const std::string dir = FreshDir();
  DeviceGroup<Cpu> group(d, {.timeout = std::chrono::milliseconds(300), .flight_recorder_dir = dir});
  absl::Status last0, last1;
  std::thread one([&] {
    for (int i = 0; i < 4 && last1.ok(); ++i) last1 = Call(group, 1, 4, absl::StrCat("call ", i));
  });
  for (int i = 0; i < 5 && last0.ok(); ++i) last0 = Call(group, 0, 4, absl::StrCat("call ", i));
  one.join();
  EXPECT_TRUE(last1.ok()) << last1;
  const std::string path = group.flight_recorder().dump_path();
  EXPECT_EQ(
      path,
      absl::StrCat(dir, "/rank0", group.flight_recorder().group() == 0 ? "" : ".group",
                   group.flight_recorder().group() == 0 ? "" : absl::StrCat(group.flight_recorder().group()), ".json"));
  EXPECT_EQ(last0.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(last0.message(),
            absl::StrCat("collective arrival: member(s) 1 of 2 did not arrive within 300 ms; the group is unusable "
                         "from now on; flight recorder: member 1 last entered 'call 3' (seq 3, completed); member 0 "
                         "is waiting in 'call 4' (seq 4); calls dumped to ",
                         path));
  const FlightDump dump = ReadDump(path);
  EXPECT_EQ(dump.members, 2);
  EXPECT_EQ(dump.capacity, 2048);
  EXPECT_EQ(dump.diagnosis,
            "member 1 last entered 'call 3' (seq 3, completed); member 0 is waiting in 'call 4' (seq 4)");
  ASSERT_EQ(dump.entries.size(), 9u);  // member 0's five calls, then member 1's four
  const FlightDumpEntry& waited = dump.entries[4];
  EXPECT_EQ(waited.member, 0);
  EXPECT_EQ(waited.seq, 4u);
  EXPECT_EQ(waited.op, "all_reduce(sum)");
  EXPECT_EQ(waited.tag, "call 4");
  EXPECT_EQ(FlightTensorName(waited), "f32[4]");
  EXPECT_EQ(waited.state, "failed");
  EXPECT_GE(waited.ended_us - waited.enqueued_us, 290000);
  EXPECT_EQ(dump.entries[8].member, 1);
  EXPECT_EQ(dump.entries[8].seq, 3u);
  EXPECT_EQ(dump.entries[8].state, "completed");
  EXPECT_GT(dump.entries[8].started_us, 0);
  // A later call meets the broken group: the same error, and no second report.
  EXPECT_EQ(Call(group, 1, 4, "call 4"), last0);
}

// Member 1 calls a different shape: both members get the mismatch with both full calls, and
// the dump holds the two calls side by side; the group goes on.
TEST(FlightRecorder, DifferentShapeNamesBothCallsAndDumps) {
  const auto d = TestDevices<Cpu>::Provide(2);
  const std::string dir = FreshDir();
  DeviceGroup<Cpu> group(d, {.flight_recorder_dir = dir});
  std::vector<absl::Status> statuses(2);
  std::thread one([&] {
    statuses[1] = Call(group, 1, 4, "step 0");
    if (statuses[1].ok()) statuses[1] = Call(group, 1, 4, "step 1");
  });
  statuses[0] = Call(group, 0, 4, "step 0");
  if (statuses[0].ok()) statuses[0] = Call(group, 0, 3, "step 1");
  one.join();
  const std::string path = group.flight_recorder().dump_path();
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              absl::StrCat("collective members disagree: member 0 called all_reduce(sum) 'step 1' of f32[3] but member "
                           "1 called all_reduce(sum) 'step 1' of f32[4]; every member must make the same call with "
                           "tensors of one shape and dtype; flight recorder: member 0 is in all_reduce(sum) 'step 1' "
                           "of f32[3] (seq 1); member 1 is in all_reduce(sum) 'step 1' of f32[4] (seq 1); calls "
                           "dumped to ",
                           path));
  }
  const FlightDump dump = ReadDump(path);
  ASSERT_EQ(dump.entries.size(), 4u);
  EXPECT_EQ(FlightSignature(dump.entries[1]), "all_reduce(sum) 'step 1' of f32[3]");
  EXPECT_EQ(FlightSignature(dump.entries[3]), "all_reduce(sum) 'step 1' of f32[4]");
  // Whichever member reported first had failed; the other may not have noticed yet.
  EXPECT_TRUE(dump.entries[1].state == "failed" || dump.entries[3].state == "failed");
  EXPECT_EQ(dump.entries[0].state, "completed");
  EXPECT_EQ(dump.reason.substr(0, 46), "INVALID_ARGUMENT: collective members disagree:");
  // The group still works, and its next calls are recorded after the failed ones.
  EXPECT_TRUE(group.AllReduce({T::ones({2}, DType::kF32, d[0]), T::ones({2}, DType::kF32, d[1])}, ReduceOp::kSum).ok());
  const FlightDump after = group.flight_recorder().Snapshot(/*last_only=*/true);
  ASSERT_EQ(after.entries.size(), 2u);
  EXPECT_EQ(after.entries[0].seq, 2u);
  EXPECT_EQ(after.entries[1].state, "completed");
}

// The ring keeps each member's last K calls; the dump round-trips through its parser.
TEST(FlightRecorder, KeepsTheLastCallsOfEveryMember) {
  const auto d = TestDevices<Cpu>::Provide(2);
  DeviceGroup<Cpu> group(d, {.flight_recorder_entries = 4});
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(group.AllGather({T::ones({1, 2}, DType::kF32, d[0]), T::ones({1, 2}, DType::kF32, d[1])}).ok());
  }
  const FlightDump dump = group.flight_recorder().Snapshot(false);
  ASSERT_EQ(dump.entries.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(dump.entries[i].member, i / 4);
    EXPECT_EQ(dump.entries[i].seq, 6u + i % 4);
    EXPECT_EQ(dump.entries[i].op, "all_gather");
    EXPECT_EQ(dump.entries[i].state, "completed");
    EXPECT_LE(dump.entries[i].enqueued_us, dump.entries[i].started_us);
    EXPECT_LE(dump.entries[i].started_us, dump.entries[i].ended_us);
  }
  absl::StatusOr<FlightDump> again = ParseFlightDump(FlightDumpToJson(dump));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(FlightDumpToJson(*again), FlightDumpToJson(dump));
}

// Off (0 entries), errors are as they were and nothing is kept.
TEST(FlightRecorder, OffLeavesErrorsAlone) {
  const auto d = TestDevices<Cpu>::Provide(2);
  DeviceGroup<Cpu> group(d, {.timeout = std::chrono::milliseconds(100), .flight_recorder_entries = 0});
  EXPECT_EQ(Call(group, 0, 4, "alone").message(),
            "collective arrival: member(s) 1 of 2 did not arrive within 100 ms; the group is unusable from now on");
  EXPECT_TRUE(group.flight_recorder().Snapshot(false).entries.empty());
  EXPECT_EQ(CheckFlightRecorder({.flight_recorder_entries = -1}, "all_reduce").message(),
            "all_reduce: flight_recorder_entries -1 must be in [0, 1048576] (0 turns it off)");
}

// A dump's reader refuses what is not a dump, naming what is wrong.
TEST(FlightRecorder, ParserNamesWhatIsWrong) {
  EXPECT_EQ(ParseFlightDump("{").status().message(), "not JSON");
  EXPECT_EQ(ParseFlightDump("[]").status().message(), "not a JSON object");
  EXPECT_EQ(ParseFlightDump(R"({"format": "x"})").status().message(),
            "the dump: 'format' is 'x', not 'kiln-flight-recorder 1'");
  FlightDump d{.world_size = 2, .members = 1, .capacity = 1};
  d.entries.push_back({.member = 0, .seq = 1, .op = "all_gather", .dtype = "f32", .state = "done"});
  EXPECT_EQ(ParseFlightDump(FlightDumpToJson(d)).status().message(),
            "entry 0: 'state' is 'done', not one of entered, started, completed, failed");
  d.entries[0].state = "failed";
  d.entries.push_back(d.entries[0]);
  EXPECT_EQ(ParseFlightDump(FlightDumpToJson(d)).status().message(),
            "the dump: holds more than 1 entries (1 member(s) of 1 calls)");
}

}  // namespace
}  // namespace kiln::distributed
