// The flight recorder across processes (Gloo): a rank stopped mid-run (SIGSTOP) is named by the
// other as the one that did not report, a rank that skips a collective and one that calls a
// different shape each give every rank an error naming the ranks and their calls, every rank
// that fails writes its dump, and tools/flight_recorder merges the dumps and names the first
// divergence. Arguments: process_group_worker, then tools/flight_recorder.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <csignal>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/distributed/rank_processes.h"

namespace kiln::distributed {
namespace {

using kiln::testing::RankProcesses;
using kiln::testing::RankResult;
using std::chrono::milliseconds;

std::string worker, tool;  // set by main

std::string Fresh(const char* what) {
  static int n = 0;
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", what, "-", n++);
}

struct ToolRun {
  int exit_code = -1;
  std::string output;
  std::string last_line;
};

ToolRun RunTool(const std::string& args) {
  ToolRun r;
  FILE* p = popen(absl::StrCat(tool, " ", args, " 2>&1").c_str(), "r");
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) r.output.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::string body = r.output;
  if (!body.empty() && body.back() == '\n') body.pop_back();
  r.last_line = body.substr(body.rfind('\n') == std::string::npos ? 0 : body.rfind('\n') + 1);
  return r;
}

// The text between `before` and the next `after` in s, or "".
std::string Between(const std::string& s, const std::string& before, const std::string& after) {
  const size_t at = s.find(before);
  if (at == std::string::npos) return "";
  const size_t from = at + before.size(), to = s.find(after, from);
  return to == std::string::npos ? "" : s.substr(from, to - from);
}

TEST(FlightRecorderAcrossProcesses, StoppedRankIsNamedByTheOther) {
  const std::string dir = Fresh("flight");
  RankProcesses ranks(worker, 2, absl::StrCat("file://", Fresh("store")), {{"KILN_FLIGHT_RECORDER_DIR", dir}});
  ranks.StartAll({"tagged_loop", "1", "2000"});
  ASSERT_TRUE(ranks.WaitForOutput(1, "ITERATION 50 ok", milliseconds(30000))) << ranks.Output(1);
  kill(ranks.pid(1), SIGSTOP);
  const RankResult r0 = ranks.Wait(0, milliseconds(15000));
  kill(ranks.pid(1), SIGCONT);  // it finds rank 0 gone, fails too and writes its dump
  const RankResult r1 = ranks.Wait(1, milliseconds(15000));
  EXPECT_EQ(r0.exit_code, 3) << r0.output;
  EXPECT_EQ(r1.exit_code, 3) << r1.output;
  // Rank 0 waits in some step k (its seq is k: one call per step) until its deadline; rank 1
  // never reports, and that names it.
  const std::string k = Between(r0.output, "rank 0 is waiting in 'step ", "'");
  int step = 0;
  ASSERT_TRUE(absl::SimpleAtoi(k, &step)) << r0.output;
  EXPECT_GE(step, 50);
  EXPECT_TRUE(absl::StrContains(r0.output, "STATUS DEADLINE_EXCEEDED: process group (gloo, rank 0 of 2): "))
      << r0.output;
  EXPECT_TRUE(absl::StrContains(
      r0.output,
      absl::StrCat("the process group is unusable from now on; flight recorder: rank 1 did not report within "
                   "1000 ms (stopped, hung or gone); rank 0 is waiting in 'step ",
                   step, "' (seq ", step, "); calls dumped to ", dir, "/rank0.json\n")))
      << r0.output;
  // Rank 1, resumed, reads the note rank 0 left: both stand in step k; or rank 1 was stopped
  // after sending its part of step k - 1, which let rank 0 finish it, so rank 1 is behind; or
  // rank 1 had rank 0's part of step k when it was stopped, finishes step k after the resume
  // (its part reaches a rank that has given up) and fails in step k + 1, ahead.
  const bool same =
      absl::StrContains(r1.output, absl::StrCat("; flight recorder: ranks 0, 1 are in 'step ", step, "' (seq ", step,
                                                "); calls dumped to ", dir, "/rank1.json\n"));
  const bool behind = absl::StrContains(
      r1.output, absl::StrCat("; flight recorder: rank 1 last entered 'step ", step - 1, "' (seq ", step - 1,
                              ", failed); rank 0 is "
                              "waiting in 'step ",
                              step, "' (seq ", step, "); calls dumped to ", dir, "/rank1.json\n"));
  const bool ahead =
      absl::StrContains(r1.output, absl::StrCat("; flight recorder: rank 0 last entered 'step ", step, "' (seq ", step,
                                                ", failed); rank 1 is waiting in 'step ", step + 1, "' (seq ", step + 1,
                                                "); calls dumped to ", dir, "/rank1.json\n"));
  EXPECT_TRUE(same || behind || ahead) << r1.output;
  // Rank 0's dump alone: rank 1 has none; with both, the calls agree up to step k, or rank 1
  // never made call k.
  ToolRun alone = RunTool(absl::StrCat(dir, "/rank0.json"));
  EXPECT_EQ(alone.exit_code, 0) << alone.output;
  EXPECT_TRUE(absl::StrContains(alone.output, "; no dump from rank(s) 1 (stopped, hung or gone?)\n")) << alone.output;
  EXPECT_TRUE(absl::StrContains(alone.output, absl::StrCat("  rank 0 saw: rank 1 did not report within 1000 ms "
                                                           "(stopped, hung or gone); rank 0 is waiting in 'step ",
                                                           step, "' (seq ", step, ")\n")))
      << alone.output;
  EXPECT_EQ(alone.last_line,
            "{\"dumps\":1,\"groups\":[{\"first_divergence\":null,\"group\":0,\"members\":1,\"missing_ranks\":[1],"
            "\"ranks\":[0],\"world_size\":2}]}");
  ToolRun both = RunTool(dir);
  EXPECT_EQ(both.exit_code, 0) << both.output;
  if (same) {
    EXPECT_TRUE(absl::StrContains(both.output, absl::StrCat("no divergence: every member recorded the same calls from "
                                                            "seq 0 to ",
                                                            step, "\n")))
        << both.output;
    EXPECT_EQ(both.last_line,
              "{\"dumps\":2,\"groups\":[{\"first_divergence\":null,\"group\":0,\"members\":1,\"missing_ranks\":[],"
              "\"ranks\":[0,1],\"world_size\":2}]}");
  } else {
    // The first call one rank made and the other did not: rank 1's step k when it is behind,
    // rank 1's step k + 1 (rank 0 has none) when it is ahead.
    const int seq = behind ? step : step + 1;
    const int missing = behind ? 1 : 0;
    EXPECT_TRUE(absl::StrContains(
        both.output, absl::StrCat("first divergence: seq ", seq, ": rank ", missing, " has no call (its last is seq ",
                                  seq - 1, " all_reduce(sum) 'step ", seq - 1, "' of f32[4]); rank ", 1 - missing,
                                  " called all_reduce(sum) 'step ", seq, "' of f32[4]\n")))
        << both.output;
    EXPECT_TRUE(absl::StrContains(both.last_line, absl::StrCat("\"kind\":\"missing\",\"seq\":", seq, "}")))
        << both.output;
  }
}

TEST(FlightRecorderAcrossProcesses, SkippedCollectiveIsTheFirstDivergence) {
  const std::string dir = Fresh("flight");
  RankProcesses ranks(worker, 2, absl::StrCat("file://", Fresh("store")),
                      {{"KILN_FLIGHT_RECORDER_DIR", dir}, {"SKIP", "5"}});
  ranks.StartAll({"tagged_loop", "1", "20000", "8"});
  const std::vector<RankResult> results = ranks.WaitAll(milliseconds(30000));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].exit_code, 3) << results[r].output;
    EXPECT_TRUE(absl::StrContains(
        results[r].output,
        absl::StrCat("STATUS INVALID_ARGUMENT: process group: rank 1 called all_reduce(sum) 'step 6' of f32[4] on 1 "
                     "local device(s) but rank 0 called all_reduce(sum) 'step 5' of f32[4] on 1 local device(s); every "
                     "rank must make the same collective calls, in the same order, with tensors of one shape and dtype "
                     "(no tensor was changed); flight recorder: rank 0 is in all_reduce(sum) 'step 5' of f32[4] (seq "
                     "5); rank 1 is in all_reduce(sum) 'step 6' of f32[4] (seq 5); calls dumped to ",
                     dir, "/rank", r, ".json\n")))
        << results[r].output;
  }
  ToolRun merged = RunTool(dir);
  EXPECT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_TRUE(absl::StrContains(merged.output,
                                "first divergence: seq 5: rank 0 called all_reduce(sum) 'step 5' of f32[4]; rank 1 "
                                "called all_reduce(sum) 'step 6' of f32[4]\n"))
      << merged.output;
  EXPECT_EQ(merged.last_line,
            "{\"dumps\":2,\"groups\":[{\"first_divergence\":{\"calls\":{\"rank 0\":\"all_reduce(sum) 'step 5' of "
            "f32[4]\",\"rank 1\":\"all_reduce(sum) 'step 6' of f32[4]\"},\"kind\":\"different\",\"seq\":5},\"group\":0,"
            "\"members\":1,\"missing_ranks\":[],\"ranks\":[0,1],\"world_size\":2}]}");
}

TEST(FlightRecorderAcrossProcesses, DifferentShapeIsDumpedAndNamed) {
  const std::string dir = Fresh("flight");
  RankProcesses ranks(worker, 2, absl::StrCat("file://", Fresh("store")), {{"KILN_FLIGHT_RECORDER_DIR", dir}});
  ranks.StartAll({"mismatch_shape"});
  for (const RankResult& r : ranks.WaitAll(milliseconds(30000))) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(absl::StrContains(r.output,
                                  "; flight recorder: rank 0 is in all_reduce(sum) of f32[4] (seq 0); rank 1 is in "
                                  "all_reduce(sum) of f32[5] (seq 0); calls dumped to "))
        << r.output;
  }
  ToolRun merged = RunTool(dir);
  EXPECT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_TRUE(absl::StrContains(merged.output,
                                "first divergence: seq 0: rank 0 called all_reduce(sum) of f32[4]; rank 1 called "
                                "all_reduce(sum) of f32[5]\n"))
      << merged.output;
}

TEST(FlightRecorderTool, BadInputExitsTwoNamingTheFile) {
  const std::string path = Fresh("garbage");
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("{\"format\": ", f);
  std::fclose(f);
  ToolRun bad = RunTool(path);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.output, absl::StrCat("flight_recorder: ", path, ": not a flight recorder dump: not JSON\n"));
  ToolRun none = RunTool("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.output, "flight_recorder: usage: flight_recorder [--tail=N] DIR_OR_DUMP...\n");
  ToolRun missing = RunTool(path + "-missing");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(absl::StartsWith(missing.output, absl::StrCat("flight_recorder: ", path, "-missing: ")))
      << missing.output;
}

// Texts come from outside: control bytes and backslashes reach the terminal escaped, so a
// dump can neither clear the screen nor fake a report line.
TEST(FlightRecorderTool, TextsFromDumpsAreEscaped) {
  const std::string path = Fresh("escape");
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(
      R"({"format": "kiln-flight-recorder 1", "group": 0, "rank": 0, "world_size": 1, "members": 1, "capacity": 1,)"
      R"( "dumped_us": 0, "reason": "", "diagnosis": "\u001b[2J", "entries": [{"member": 0, "seq": 0, "op": "x",)"
      R"( "tag": "a\\b\nno divergence: \u009b", "dtype": "f32", "shape": [1], "enqueued_us": 5, "started_us": 0,)"
      R"( "ended_us": 0, "state": "entered", "error": ""}]})",
      f);
  std::fclose(f);
  ToolRun r = RunTool(path);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, std::string("group 0: dumps of rank(s) 0 of 1, 1 member(s) each\n"
                                  "  rank 0 saw: \\x1b[2J\n"
                                  "        +0.000 ms  rank 0             seq 0        entered          ... ms  x "
                                  "'a\\\\b\\x0ano divergence: \\xc2\\x9b' of f32[1]\n"
                                  "no divergence: every member recorded the same calls from seq 0 to 0\n"
                                  "{\"dumps\":1,\"groups\":[{\"first_divergence\":null,\"group\":0,\"members\":1,"
                                  "\"missing_ranks\":[],\"ranks\":[0],\"world_size\":1}]}\n"));
}

}  // namespace
}  // namespace kiln::distributed

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: flight_recorder_test <process_group_worker> <flight_recorder>\n");
    return 2;
  }
  kiln::distributed::worker = argv[1];
  kiln::distributed::tool = argv[2];
  return RUN_ALL_TESTS();
}
