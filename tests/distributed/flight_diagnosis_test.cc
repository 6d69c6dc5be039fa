// The flight recorder's sentence on a failed collective, from the parties' positions alone:
// who is silent, who made no call, who is behind and in which call, who waits, and the full
// signatures when the parties at the lead are in different calls.
#include "distributed/flight_diagnosis.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kiln::distributed {
namespace {

using std::chrono::milliseconds;

FlightPosition Called(int index, uint64_t seq, const std::string& state, const std::string& signature = "") {
  const std::string call = "'step " + std::to_string(seq) + "'";
  return {.kind = FlightPosition::kCalled,
          .index = index,
          .seq = seq,
          .call = call,
          .signature = signature.empty() ? "all_reduce(sum) " + call + " of f32[4]" : signature,
          .state = state};
}

FlightPosition Silent(int index) { return {.kind = FlightPosition::kSilent, .index = index}; }
FlightPosition NoCall(int index) { return {.kind = FlightPosition::kNoCall, .index = index}; }

TEST(FlightDiagnosis, NobodyHasCalled) {
  EXPECT_EQ(DiagnoseFlight({}, "rank", milliseconds(1000)), "no rank has made a call");
}

TEST(FlightDiagnosis, EveryoneInOneCall) {
  EXPECT_EQ(DiagnoseFlight({Called(0, 3, "entered"), Called(1, 3, "started")}, "rank", milliseconds(1000)),
            "ranks 0, 1 are in 'step 3' (seq 3)");
}

TEST(FlightDiagnosis, ASilentRankLeavesTheOthersWaiting) {
  EXPECT_EQ(DiagnoseFlight({Called(0, 5, "entered"), Silent(1)}, "rank", milliseconds(1000)),
            "rank 1 did not report within 1000 ms (stopped, hung or gone); rank 0 is waiting in 'step 5' (seq 5)");
  EXPECT_EQ(DiagnoseFlight({Silent(1), Silent(2)}, "rank", milliseconds(250)),
            "ranks 1, 2 did not report within 250 ms (stopped, hung or gone)");
}

// Silent, then without a call, then behind from the furthest back, then those waiting.
TEST(FlightDiagnosis, EachKindOfLaggardInTurn) {
  EXPECT_EQ(DiagnoseFlight(
                {Called(0, 5, "entered"), Called(2, 4, "completed"), Called(1, 3, "started"), NoCall(3), Silent(4)},
                "member", milliseconds(10)),
            "member 4 did not report within 10 ms (stopped, hung or gone); member 3 has made no call; member 1 last "
            "entered 'step 3' (seq 3, started); member 2 last entered 'step 4' (seq 4, completed); member 0 is "
            "waiting in 'step 5' (seq 5)");
  EXPECT_EQ(DiagnoseFlight({NoCall(0), NoCall(1)}, "rank", milliseconds(10)), "ranks 0, 1 have made no call");
}

TEST(FlightDiagnosis, LaggardsInOneCallAreNamedTogether) {
  EXPECT_EQ(DiagnoseFlight({Called(0, 3, "entered"), Called(1, 2, "completed"), Called(2, 3, "entered"),
                            Called(3, 2, "completed")},
                           "rank", milliseconds(10)),
            "ranks 1, 3 last entered 'step 2' (seq 2, completed); ranks 0, 2 are waiting in 'step 3' (seq 3)");
}

TEST(FlightDiagnosis, DifferentCallsAtTheLeadAreNamedByTheirSignatures) {
  const std::string four = "all_reduce(sum) of f32[4]", five = "all_reduce(sum) of f32[5]";
  EXPECT_EQ(
      DiagnoseFlight({Called(0, 3, "entered", four), Called(1, 3, "entered", five), Called(2, 3, "entered", four)},
                     "rank", milliseconds(10)),
      "ranks 0, 2 are in all_reduce(sum) of f32[4] (seq 3); rank 1 is in all_reduce(sum) of f32[5] (seq 3)");
}

// A party that completed the lead call is told apart from those still in it.
TEST(FlightDiagnosis, CompletedAtTheLead) {
  EXPECT_EQ(DiagnoseFlight({Called(0, 5, "completed"), Called(1, 5, "entered")}, "rank", milliseconds(10)),
            "rank 0 last entered 'step 5' (seq 5, completed); rank 1 is in 'step 5' (seq 5)");
}

}  // namespace
}  // namespace kiln::distributed
