// The Gloo process group across real processes: collectives over 1 to 3 processes of 1 and 2
// devices against exact values, the autodiff path and mismatched calls reported on every rank
// before any tensor changes, large tensors, each on every compiled-in backend; on the CPU,
// DataParallel against the in-process run, and faults (a rank killed, a rank stopped) ending
// every other rank within the timeout. Ranks are child processes running
// process_group_worker (its path is the first argument).
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>

#include "absl/strings/match.h"
#include "backends/registry.h"
#include "tests/backend_names.h"
#include "tests/backends.h"
#include "tests/distributed/rank_processes.h"

namespace kiln::distributed {
namespace {

using kiln::testing::RankProcesses;
using kiln::testing::RankResult;
using std::chrono::milliseconds;

std::string worker;  // set by main

std::string FreshStore() {
  static int n = 0;
  return absl::StrCat("file://", std::getenv("TEST_TMPDIR"), "/store-", n++);
}

void ExpectAllPassed(const std::vector<RankResult>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
    EXPECT_FALSE(absl::StrContains(results[r].output, "FAIL")) << results[r].output;
  }
}

struct Shape {
  int processes, devices;
};

// Collectives and their backward on every backend compiled into this build
// (backends/registry.h), each rank on its own devices of the backend: Vulkan's staged through
// host memory, CUDA's through NCCL. A backend whose devices are GPUs needs one per member and
// skips without them; any other backend that cannot run fails where the run requires it
// (KILN_REQUIRE_BACKENDS).
struct OnBackend {
  std::string backend;
  Shape shape;
};

std::vector<OnBackend> EveryBackend(const std::vector<Shape>& shapes) {
  std::vector<OnBackend> out;
  for (const std::string& backend : kiln::testing::CompiledBackendNames()) {
    for (const Shape& shape : shapes) out.push_back({backend, shape});
  }
  return out;
}

template <class B>
void SkipUnlessRuns(int members) {
  KILN_SKIP_IF_UNAVAILABLE(B);
  KILN_SKIP_IF_FEWER_DEVICES(B, members);
}

class BackendCollectives : public ::testing::TestWithParam<OnBackend> {
 protected:
  void SetUp() override {
    const auto& [backend, shape] = GetParam();
    const bool known = CompiledBackends::AnyOf([&]<class B>() {
      if (backend != B::Name()) return false;
      SkipUnlessRuns<B>(shape.processes * shape.devices);
      return true;
    });
    ASSERT_TRUE(known) << backend;
  }
  // Every rank runs `<backend>_<scenario>` on shape.devices devices.
  std::vector<RankResult> Run(const std::string& scenario) {
    const auto& [backend, shape] = GetParam();
    RankProcesses ranks(worker, shape.processes, FreshStore());
    ranks.StartAll({absl::StrCat(backend, "_", scenario), absl::StrCat(shape.devices)});
    return ranks.WaitAll(milliseconds(120000));
  }
};

TEST_P(BackendCollectives, EveryOpEveryKindExact) { ExpectAllPassed(Run("collectives")); }

// All-reduces and reduce-scatters past the process group's small-payload cutoff.
TEST_P(BackendCollectives, LargeAllReducesExact) { ExpectAllPassed(Run("large")); }

TEST_P(BackendCollectives, AutodiffBackwardIsACollectiveOverTheWorld) { ExpectAllPassed(Run("autodiff")); }

// "vulkan_2x2": the backend, then processes x devices per process.
std::string CaseName(const ::testing::TestParamInfo<OnBackend>& info) {
  return absl::StrCat(info.param.backend, "_", info.param.shape.processes, "x", info.param.shape.devices);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendCollectives,
                         ::testing::ValuesIn(EveryBackend({{1, 1}, {1, 2}, {2, 1}, {2, 2}, {3, 1}})), CaseName);

// Calls that differ across ranks, on every backend: each rank names both calls, and the group
// goes on.
class BackendErrors : public BackendCollectives {};

TEST_P(BackendErrors, MismatchedShapesFailOnEveryRankBeforeDataMoves) {
  for (const RankResult& r : Run("mismatch_shape")) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(absl::StrContains(
        r.output,
        absl::StrCat("STATUS INVALID_ARGUMENT: process group: rank 1 called all_reduce(sum) of f32[5] on ",
                     GetParam().shape.devices, " local device(s) but rank 0 called all_reduce(sum) of f32[4] on ",
                     GetParam().shape.devices, " local device(s); every rank must make the same collective calls")))
        << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "OK the next call works")) << r.output;
    EXPECT_TRUE(absl::StrContains(r.output,
                                  "STATUS INVALID_ARGUMENT: process group: rank 1 called step 2 but rank 0 called "
                                  "step 1; every rank must make the same collective calls"))
        << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "OK agreeing on one call works")) << r.output;
  }
}

TEST_P(BackendErrors, MismatchedDtypesFailOnEveryRank) {
  for (const RankResult& r : Run("mismatch_dtype")) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(absl::StrContains(
        r.output,
        absl::StrCat("STATUS INVALID_ARGUMENT: process group: rank 1 called all_reduce(sum) of f64[4] on ",
                     GetParam().shape.devices, " local device(s) but rank 0 called all_reduce(sum) of f32[4] on ",
                     GetParam().shape.devices, " local device(s);")))
        << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "OK the next call works")) << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendErrors, ::testing::ValuesIn(EveryBackend({{2, 1}, {2, 2}})), CaseName);

// On the CPU: DataParallel across processes against the same in one process.
class Collectives : public ::testing::TestWithParam<Shape> {};

TEST_P(Collectives, DataParallelMatchesOneProcess) {
  RankProcesses ranks(worker, GetParam().processes, FreshStore());
  ranks.StartAll({"data_parallel", absl::StrCat(GetParam().devices), "20000", "6"});
  ExpectAllPassed(ranks.WaitAll(milliseconds(60000)));
}

// The same with gradients all-reduced in bf16 across processes.
TEST_P(Collectives, DataParallelWithBf16GradientsMatchesOneProcess) {
  RankProcesses ranks(worker, GetParam().processes, FreshStore());
  ranks.StartAll({"data_parallel_bf16", absl::StrCat(GetParam().devices), "20000", "6"});
  ExpectAllPassed(ranks.WaitAll(milliseconds(60000)));
}

// Sharded (ZeRO-1, 2 and 3) across processes: the same parameters as the unsharded run in
// one process (bit-identical with 2 members, as unsharded).
TEST_P(Collectives, ShardedDataParallelMatchesOneProcess) {
  for (const char* stage : {"data_parallel_optimizer", "data_parallel_gradients", "data_parallel_parameters"}) {
    RankProcesses ranks(worker, GetParam().processes, FreshStore());
    ranks.StartAll({stage, absl::StrCat(GetParam().devices), "20000", "6"});
    ExpectAllPassed(ranks.WaitAll(milliseconds(60000)));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Collectives, ::testing::Values(Shape{1, 2}, Shape{2, 1}, Shape{2, 2}, Shape{3, 1}),
                         [](const auto& info) { return absl::StrCat(info.param.processes, "x", info.param.devices); });

// On the CPU, with the flight recorder's whole note.
TEST(ProcessGroupErrors, MismatchedShapesFailOnEveryRankBeforeDataMoves) {
  RankProcesses ranks(worker, 2, FreshStore());
  ranks.StartAll({"mismatch_shape"});
  const auto results = ranks.WaitAll(milliseconds(30000));
  for (const RankResult& r : results) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(absl::StrContains(
        r.output,
        "STATUS INVALID_ARGUMENT: process group: rank 1 called all_reduce(sum) of f32[5] on 1 local device(s) but "
        "rank 0 called all_reduce(sum) of f32[4] on 1 local device(s); every rank must make the same collective "
        "calls, in the same order, with tensors of one shape and dtype (no tensor was changed); flight recorder: "
        "rank 0 is in all_reduce(sum) of f32[4] (seq 0); rank 1 is in all_reduce(sum) of f32[5] (seq 0) (set "
        "KILN_FLIGHT_RECORDER_DIR to dump every member's last calls)\n"))
        << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "OK the next call works")) << r.output;
    EXPECT_TRUE(absl::StrContains(r.output,
                                  "STATUS INVALID_ARGUMENT: process group: rank 1 called step 2 but rank 0 called "
                                  "step 1; every rank must make the same collective calls"))
        << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "OK agreeing on one call works")) << r.output;
  }
}

// The direct all-reduce sends its first segments before the ranks have compared their calls;
// when they differ, every rank still reports it, and those segments never reach a result.
TEST(ProcessGroupErrors, MismatchesOnTheDirectPathLeaveTheGroupExact) {
  for (int processes : {2, 3}) {
    RankProcesses ranks(worker, processes, FreshStore());
    ranks.StartAll({"mismatch_large"});
    for (const RankResult& r : ranks.WaitAll(milliseconds(60000))) {
      EXPECT_EQ(r.exit_code, 0) << r.output;
      EXPECT_FALSE(absl::StrContains(r.output, "FAIL")) << r.output;
      for (const char* call : {"all_reduce(sum) of f32[786446] on 1 local device(s)", "something else",
                               "reduce_scatter(sum) of f32[786438] on 1 local device(s)",
                               "all_reduce(sum) of f32[3] on 1 local device(s)"}) {
        EXPECT_TRUE(absl::StrContains(r.output, absl::StrCat("STATUS INVALID_ARGUMENT: process group: rank 1 called ",
                                                             call, " but rank 0 called all_reduce(sum) of f32[")))
            << call << "\n"
            << r.output;
      }
      for (const char* after : {"a longer tensor", "an agreement", "a reduce-scatter", "a small tensor"}) {
        EXPECT_TRUE(absl::StrContains(r.output, absl::StrCat("OK exact after ", after))) << r.output;
      }
    }
  }
}

// Repeated all-reduces must not wait on the kernel: Gloo's registered buffers fix a socket's
// send buffer at the size of the largest message sent through them, and kiln once sent only
// a few bytes that way (its data went through unbound buffers), after which every 1 MiB call
// stalled on delayed acks (40-200 ms, median ~50 ms, against ~1 ms). The bound is 20x a
// normal call here, so a slow machine still passes it; sanitized builds, whose reductions run
// 10-20x slower, get a smoke test's bound.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kRepeatedBoundMs = 200;
#else
constexpr double kRepeatedBoundMs = 20;
#endif

TEST(ProcessGroupSpeed, RepeatedAllReducesDoNotStall) {
  RankProcesses ranks(worker, 2, FreshStore());
  ranks.StartAll({"repeated"});
  for (const RankResult& r : ranks.WaitAll(milliseconds(60000))) {
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const size_t at = r.output.find("MEDIAN_MS ");
    ASSERT_NE(at, std::string::npos) << r.output;
    EXPECT_LT(std::stod(r.output.substr(at + 10)), kRepeatedBoundMs) << r.output;
  }
}

// The same stall for Gloo's own broadcast and all-gather, which never size a socket's send
// buffer themselves: made first, before any all-reduce, 16 MiB took ~10 s when the group's
// first registered message was a 64-byte claim (a group sizes them at connect now).
TEST(ProcessGroupSpeed, LargeBroadcastAndAllGatherFirstDoNotStall) {
  RankProcesses ranks(worker, 2, FreshStore());
  ranks.StartAll({"broadcast_first"});
  for (const RankResult& r : ranks.WaitAll(milliseconds(60000))) {
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* what : {"BROADCAST_MS ", "ALLGATHER_MS "}) {
      const size_t at = r.output.find(what);
      ASSERT_NE(at, std::string::npos) << r.output;
      EXPECT_LT(std::stod(r.output.substr(at + std::strlen(what))), 2000.0) << what << r.output;
    }
  }
}

// A caller of the process group may give different operations the same call string: the
// agreement compares the operations too, so every rank reports both (before, a count
// mismatch aborted the process in Gloo's event loop and other pairs timed out).
TEST(ProcessGroupErrors, SameCallStringForDifferentOperationsFailsOnEveryRank) {
  RankProcesses ranks(worker, 2, FreshStore());
  ranks.StartAll({"same_string"});
  for (const RankResult& r : ranks.WaitAll(milliseconds(60000))) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_FALSE(absl::StrContains(r.output, "FAIL")) << r.output;
    for (const char* theirs : {"all_reduce(sum) of 999 f32", "reduce_scatter(sum) of 1000 f32", "an agreement"}) {
      EXPECT_TRUE(absl::StrContains(
          r.output, absl::StrCat("STATUS INVALID_ARGUMENT: process group: rank 1 called step as ", theirs,
                                 " but rank 0 as all_reduce(sum) of 1000 f32; every rank must make the same "
                                 "collective calls")))
          << theirs << "\n"
          << r.output;
    }
    for (const char* after : {"counts", "kinds", "an agreement"}) {
      EXPECT_TRUE(absl::StrContains(r.output, absl::StrCat("OK exact after ", after))) << r.output;
      EXPECT_TRUE(absl::StrContains(r.output, absl::StrCat("OK untouched by ", after))) << r.output;
    }
  }
}

// A rank killed mid-run: the survivor's next collective fails at once (the connection closes)
// or at the latest at the timeout, with a status naming the dead rank; no hang.
TEST(ProcessGroupFaults, KilledRankFailsTheOthersWithinTheTimeout) {
  RankProcesses ranks(worker, 3, FreshStore());
  ranks.StartAll({"loop", "1", "4000"});
  ASSERT_TRUE(ranks.WaitForOutput(2, "ITERATION 50 ok", milliseconds(30000))) << ranks.Output(2);
  const auto killed_at = std::chrono::steady_clock::now();
  kill(ranks.pid(2), SIGKILL);
  for (int r = 0; r < 2; ++r) {
    const RankResult result = ranks.Wait(r, milliseconds(15000));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
    EXPECT_EQ(result.exit_code, 3) << result.output;
    EXPECT_LT(seconds, 4.0 + 3.0) << result.output;  // the timeout, plus slack for a loaded machine
    EXPECT_TRUE(absl::StrContains(result.output, "STATUS UNAVAILABLE: process group (gloo, rank ") ||
                absl::StrContains(result.output, "STATUS DEADLINE_EXCEEDED: process group (gloo, rank "))
        << result.output;
    EXPECT_TRUE(absl::StrContains(result.output, "the process group is unusable from now on")) << result.output;
  }
  EXPECT_EQ(ranks.Wait(2, milliseconds(1000)).signal, SIGKILL);
}

// Ranks that disagree on the sharding stage all fail at Create, naming the difference.
TEST(ProcessGroupErrors, RanksThatDisagreeOnShardingAllFail) {
  RankProcesses ranks(worker, 2, FreshStore());
  ranks.StartAll({"shard_disagree"});
  for (const RankResult& r : ranks.WaitAll(milliseconds(30000))) {
    EXPECT_EQ(r.exit_code, 3) << r.output;
    EXPECT_TRUE(
        absl::StrContains(r.output,
                          "STATUS INVALID_ARGUMENT: DataParallel: the ranks disagree on sharding: global member "
                          "0 shards 'none' but global member 1 shards 'gradients'; pass every rank the same "
                          "--shard\n"))
        << r.output;
  }
}

// A rank killed during sharded training (ZeRO-2's reduce-scatters and all-gathers, ZeRO-3's
// per-layer gathers): every other rank fails within the timeout, naming a process-group
// failure; no hang.
TEST(ProcessGroupFaults, KilledRankFailsShardedTrainingWithinTheTimeout) {
  for (const char* loop : {"sharded_loop", "zero3_loop"}) {
    SCOPED_TRACE(loop);
    RankProcesses ranks(worker, 3, FreshStore());
    ranks.StartAll({loop, "1", "4000"});
    ASSERT_TRUE(ranks.WaitForOutput(2, "ITERATION 40 ok", milliseconds(60000))) << ranks.Output(2);
    const auto killed_at = std::chrono::steady_clock::now();
    kill(ranks.pid(2), SIGKILL);
    for (int r = 0; r < 2; ++r) {
      const RankResult result = ranks.Wait(r, milliseconds(15000));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
      EXPECT_EQ(result.exit_code, 3) << result.output;
      EXPECT_LT(seconds, 4.0 + 3.0) << result.output;
      EXPECT_TRUE(absl::StrContains(result.output, "STATUS UNAVAILABLE: process group (gloo, rank ") ||
                  absl::StrContains(result.output, "STATUS DEADLINE_EXCEEDED: process group (gloo, rank "))
          << result.output;
    }
    EXPECT_EQ(ranks.Wait(2, milliseconds(1000)).signal, SIGKILL);
  }
}

// A rank that is alive but stuck (stopped): no connection closes, so the others wait exactly
// the timeout and report DEADLINE_EXCEEDED naming it.
TEST(ProcessGroupFaults, StuckRankGivesDeadlineExceeded) {
  RankProcesses ranks(worker, 2, FreshStore());
  ranks.StartAll({"loop", "1", "2000"});
  ASSERT_TRUE(ranks.WaitForOutput(1, "ITERATION 50 ok", milliseconds(30000))) << ranks.Output(1);
  kill(ranks.pid(1), SIGSTOP);
  const RankResult result = ranks.Wait(0, milliseconds(15000));
  kill(ranks.pid(1), SIGKILL);
  EXPECT_EQ(result.exit_code, 3) << result.output;
  // Stopped in the agreement on the call or in the data exchange itself.
  EXPECT_TRUE(absl::StrContains(result.output, "STATUS DEADLINE_EXCEEDED: process group (gloo, rank 0 of 2): "))
      << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "all_reduce(sum) of f32[65536]")) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, " got no answer from rank(s) 1 within 2000 ms (")) << result.output;
  // From the last success to the failure: about the timeout, never a hang.
  const size_t at = result.output.find("FAILED after ");
  ASSERT_NE(at, std::string::npos) << result.output;
  const double waited = std::stod(result.output.substr(at + 13));
  EXPECT_GE(waited, 1.9);
  EXPECT_LT(waited, 5.0);
}

// A rank whose call times out closes its connections at once (Gloo does so on its timeouts;
// kiln's group does the same on any other failure), so a peer learns from the closed
// connection rather than at its own, here much longer, deadline. Rank 1 (2 s timeout) gives up
// while rank 0 is stopped and then stays alive (LINGER_MS), so no process exit closes anything;
// resumed, rank 0 (60 s timeout) must fail within 10 s, naming rank 1.
TEST(ProcessGroupFaults, BrokenGroupClosesItsConnectionsSoPeersFailFast) {
  RankProcesses ranks(worker, 2, FreshStore(), {{"LINGER_MS", "30000"}});
  ranks.Start(0, {"loop", "1", "60000"});
  ranks.Start(1, {"loop", "1", "2000"});
  ASSERT_TRUE(ranks.WaitForOutput(0, "ITERATION 50 ok", milliseconds(30000))) << ranks.Output(0);
  kill(ranks.pid(0), SIGSTOP);
  const bool rank1_failed = ranks.WaitForOutput(1, "STATUS DEADLINE_EXCEEDED", milliseconds(15000));
  kill(ranks.pid(0), SIGCONT);
  ASSERT_TRUE(rank1_failed) << ranks.Output(1);
  // (Both ranks linger after failing; the destructor of `ranks` ends them.)
  ASSERT_TRUE(ranks.WaitForOutput(0, "STATUS ", milliseconds(10000))) << ranks.Output(0);
  const std::string out = ranks.Output(0);
  EXPECT_TRUE(absl::StrContains(out, "STATUS UNAVAILABLE: process group (gloo, rank 0 of 2): ")) << out;
  EXPECT_TRUE(absl::StrContains(out, " lost its connection to rank(s) 1 (")) << out;
}

}  // namespace
}  // namespace kiln::distributed

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: process_group_test <process_group_worker>\n");
    return 2;
  }
  kiln::distributed::worker = argv[1];
  return RUN_ALL_TESTS();
}
