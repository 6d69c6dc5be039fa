// Joining a process group: bad world sizes, ranks and addresses, stores that cannot be used,
// ranks that never join, and both stores (Gloo's FileStore and RedisStore) end to end.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "distributed/gloo/gloo_process_group.h"
#include "tests/distributed/rank_processes.h"

namespace kiln::distributed {
namespace {

using std::chrono::milliseconds;

std::string worker;  // set by main

std::string TmpDir() { return std::getenv("TEST_TMPDIR"); }

// A TCP port on 127.0.0.1 with nothing listening on it (bound, then released).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

absl::Status Connect(int rank, int world, const std::string& address, int64_t timeout_ms = 2000,
                     const std::string& run_id = "t") {
  return GlooProcessGroup::Connect({.rank = rank,
                                    .world_size = world,
                                    .rendezvous = address,
                                    .run_id = run_id,
                                    .host = "127.0.0.1",
                                    .timeout = milliseconds(timeout_ms)})
      .status();
}

TEST(Rendezvous, BadWorldSizeRankAndTimeout) {
  const std::string store = "file://" + TmpDir() + "/bad";
  absl::Status s = Connect(0, 0, store);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "process group: world size 0 is invalid; it must be at least 1");
  s = Connect(2, 2, store);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "process group: rank 2 is out of range for world size 2 (ranks are 0..1)");
  s = Connect(-1, 2, store);
  EXPECT_EQ(s.message(), "process group: rank -1 is out of range for world size 2 (ranks are 0..1)");
  s = Connect(0, 1, store, 0);
  EXPECT_EQ(s.message(), "process group: timeout 0 ms must be positive and at most 604800000 ms (a week)");
  // A deadline of now + timeout would overflow.
  s = Connect(0, 1, store, int64_t{1} << 62);
  EXPECT_EQ(s.message(),
            "process group: timeout 4611686018427387904 ms must be positive and at most 604800000 ms (a week)");
  // A launcher's typo must not make every rank wait for two billion others.
  s = Connect(0, 2147483647, store);
  EXPECT_EQ(s.message(), "process group: world size 2147483647 is more than 65536 ranks");
}

// A rank that times out names who is missing, but never a million of them.
TEST(Rendezvous, AWorldOfAbsentRanksIsNamedBriefly) {
  const absl::Status s = Connect(0, 65536, "file://" + TmpDir() + "/absent", 300);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(s.message(), ": rank(s) 1, 2, 3, 4, 5, 6, 7, 8 and 65527 more of 65536 did not join"))
      << s.message();
  EXPECT_LT(s.message().size(), 400u);
}

TEST(Rendezvous, BadAddresses) {
  for (const char* address : {"tcp://host:1", "file://relative/dir", "redis://", "redis://host:0", "redis://h:x", ""}) {
    const absl::Status s = Connect(0, 1, address);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_EQ(s.message(), absl::StrCat("rendezvous address '", address,
                                        "': expected file:///absolute/shared/dir or redis://host[:port]"));
  }
}

TEST(Rendezvous, UnusableDirectories) {
  // /sys refuses new entries even to root, so these hold in CI (root) and for users.
  absl::Status s = Connect(0, 1, "file:///sys");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(s.message(), "rendezvous store file:///sys: directory /sys is not writable: ")) << s;
  s = Connect(0, 1, "file:///sys/kiln-rendezvous/run");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(s.message(),
                               "rendezvous store file:///sys/kiln-rendezvous/run: cannot create "
                               "directory /sys/kiln-rendezvous: "))
      << s;
  const std::string file = TmpDir() + "/a-file";
  FILE* f = std::fopen(file.c_str(), "w");
  std::fclose(f);
  s = Connect(0, 1, "file://" + file);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), absl::StrCat("rendezvous store file://", file, ": ", file, " is not a directory"));
}

TEST(Rendezvous, UnreachableRedis) {
  const int port = FreePort();
  const absl::Status s = Connect(0, 2, absl::StrCat("redis://127.0.0.1:", port));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            absl::StrCat("rendezvous store redis://127.0.0.1:", port, " is unreachable: Connection refused"));
}

TEST(Rendezvous, RanksThatNeverJoinAreNamed) {
  const std::string store = "file://" + TmpDir() + "/never";
  const auto start = std::chrono::steady_clock::now();
  const absl::Status s = Connect(1, 4, store, 1500, "never");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(), absl::StrCat("rendezvous at ", store,
                                      " (run never) timed out after 1500 ms: rank(s) 0, 2, 3 "
                                      "of 4 did not join (this is rank 1); start every rank with the same rendezvous "
                                      "address, run id and world size"));
  EXPECT_GE(seconds, 1.4);
  EXPECT_LT(seconds, 4);
}

TEST(Rendezvous, DuplicateRankOrReusedRunIsRefused) {
  const std::string store = "file://" + TmpDir() + "/dup";
  ASSERT_TRUE(Connect(0, 1, store, 2000, "once").ok());
  const absl::Status s = Connect(0, 1, store, 2000, "once");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), absl::StrCat("rendezvous at ", store,
                                      " (run once): rank 0 has already joined this run; "
                                      "either two processes have rank 0 or an earlier run used this store with the "
                                      "same run id (give each run a fresh directory or KILN_RUN_ID)"));
  // Another run id in the same directory is another run.
  EXPECT_TRUE(Connect(0, 1, store, 2000, "twice").ok());
}

TEST(Rendezvous, FileStoreAcrossProcesses) {
  kiln::testing::RankProcesses ranks(worker, 2, "file://" + TmpDir() + "/files");
  ranks.StartAll({"collectives"});
  for (const auto& r : ranks.WaitAll(milliseconds(60000))) EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A rank that never joins, seen from processes that did: each names it.
TEST(Rendezvous, MissingRankNamedByEveryRankThatJoined) {
  kiln::testing::RankProcesses ranks(worker, 3, "file://" + TmpDir() + "/missing");
  ranks.Start(0, {"join", "1", "1000"});
  ranks.Start(2, {"join", "1", "1000"});
  for (int r : {0, 2}) {
    const auto result = ranks.Wait(r, milliseconds(10000));
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_TRUE(absl::StrContains(
        result.output, absl::StrCat("timed out after 1000 ms: rank(s) 1 of 3 did not join (this is rank ", r, ")")))
        << result.output;
  }
}

// Debian's redis-server, started here on a free port and stopped at the end.
TEST(Rendezvous, RedisStoreAcrossProcesses) {
  if (access("/usr/bin/redis-server", X_OK) != 0)
    GTEST_SKIP() << "redis-server is not installed (./bazelw installs it)";
  const int port = FreePort();
  const pid_t redis = fork();
  if (redis == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    const std::string p = absl::StrCat(port);
    execl("/usr/bin/redis-server", "redis-server", "--port", p.c_str(), "--bind", "127.0.0.1", "--save", "",
          "--appendonly", "no", static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string address = absl::StrCat("redis://127.0.0.1:", port);
  absl::Status up = absl::UnknownError("not tried");
  for (int i = 0; i < 100 && !up.ok(); ++i) {  // until the server listens
    std::this_thread::sleep_for(milliseconds(50));
    up = Connect(0, 1, address, 2000, absl::StrCat("probe", i));
  }
  EXPECT_TRUE(up.ok()) << up;
  {
    kiln::testing::RankProcesses ranks(worker, 2, address);
    ranks.StartAll({"collectives", "2"});
    for (const auto& r : ranks.WaitAll(milliseconds(60000))) EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  const absl::Status missing = Connect(1, 2, address, 1000, "redis-missing");
  EXPECT_EQ(missing.message(), absl::StrCat("rendezvous at ", address,
                                            " (run redis-missing) timed out after 1000 ms: "
                                            "rank(s) 0 of 2 did not join (this is rank 1); start every rank with the "
                                            "same rendezvous address, run id and world size"));
  kill(redis, SIGTERM);
  waitpid(redis, nullptr, 0);
}

}  // namespace
}  // namespace kiln::distributed

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: rendezvous_store_test <process_group_worker>\n");
    return 2;
  }
  kiln::distributed::worker = argv[1];
  return RUN_ALL_TESTS();
}
