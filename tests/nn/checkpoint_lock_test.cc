// One run per checkpoint folder: a second taker is refused naming the holder, the lock is free
// again once its holder is gone (also when it was killed), and the record it leaves names the
// run the folder's checkpoints were last written by.
#include "nn/checkpoint_lock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kiln::nn {
namespace {

std::string FreshDir() {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/", ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(CheckpointLock, ASecondTakerIsRefusedNamingTheHolder) {
  const std::string dir = FreshDir();
  auto first = CheckpointDirLock::Take(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE((*first)->previous().has_value());  // a new folder
  auto early = CheckpointDirLock::Take(dir);       // before the holder recorded itself
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(early.status().message(), "a process that has not recorded itself yet"));
  ASSERT_TRUE((*first)->Record("00aa11bb22cc33dd").ok());
  auto second = CheckpointDirLock::Take(dir);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(second.status().message());
  EXPECT_TRUE(absl::StartsWith(message, absl::StrCat(dir, " is in use by another run: pid ", getpid(), " on host ")))
      << message;
  EXPECT_TRUE(absl::StrContains(message,
                                " UTC (run 00aa11bb22cc33dd). Two runs writing one folder would prune and "
                                "resume each other's checkpoints: wait for it to end, or give this run a "
                                "--checkpoint_dir of its own"))
      << message;
  first->reset();
  auto third = CheckpointDirLock::Take(dir);
  ASSERT_TRUE(third.ok()) << third.status();
  ASSERT_TRUE((*third)->previous().has_value());
  EXPECT_EQ((*third)->previous()->run, "00aa11bb22cc33dd");
  EXPECT_EQ((*third)->previous()->pid, getpid());
}

// The kernel releases a killed holder's lock: nothing is left stuck.
TEST(CheckpointLock, AKilledHolderLeavesItFree) {
  const std::string dir = FreshDir();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = CheckpointDirLock::Take(dir);
    const char ok = lock.ok() && (*lock)->Record("feed").ok() ? 'y' : 'n';
    (void)!write(ready[1], &ok, 1);
    pause();
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  EXPECT_EQ(CheckpointDirLock::Take(dir).status().code(), absl::StatusCode::kFailedPrecondition);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  auto after = CheckpointDirLock::Take(dir);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_TRUE((*after)->previous().has_value());
  EXPECT_EQ((*after)->previous()->run, "feed");
  EXPECT_EQ((*after)->previous()->pid, child);
}

TEST(CheckpointLock, RecordsReadBackExactlyAndNothingElseDoes) {
  const LockRecord r{.pid = 41, .host = "node-7.example", .since = 1796300000, .run = "0123456789abcdef"};
  const std::string text = FormatLockRecord(r);
  EXPECT_EQ(text, "kiln checkpoint folder lock\npid=41\nhost=node-7.example\nsince=1796300000\nrun=0123456789abcdef\n");
  const auto back = ParseLockRecord(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->pid, 41);
  EXPECT_EQ(back->host, "node-7.example");
  EXPECT_EQ(back->since, 1796300000);
  EXPECT_EQ(back->run, "0123456789abcdef");
  for (const std::string& bad : std::vector<std::string>{
           std::string(""),
           text.substr(0, text.size() - 1),
           text + "x",
           "kiln checkpoint folder lock\npid=0\nhost=a\nsince=1\nrun=ab\n",
           "kiln checkpoint folder lock\npid=04\nhost=a\nsince=1\nrun=ab\n",
           "kiln checkpoint folder lock\npid=-4\nhost=a\nsince=1\nrun=ab\n",
           "kiln checkpoint folder lock\npid=4\nhost=a b\nsince=1\nrun=ab\n",
           "kiln checkpoint folder lock\npid=4\nhost=\nsince=1\nrun=ab\n",
           "kiln checkpoint folder lock\npid=4\nhost=a\nsince=1\nrun=AB\n",
           "kiln checkpoint folder lock\npid=4\nhost=a\nsince=1\nrun=\n",
           "kiln checkpoint folder lock\npid=4\nhost=a\nsince=\nrun=ab\n",
           "kiln checkpoint folder lock\npid=4\nhost=a\nrun=ab\nsince=1\n",
           "kiln checkpoint folder lock\npid=99999999999\nhost=a\nsince=1\nrun=ab\n",
           std::string("kiln checkpoint folder lock\npid=4\nhost=a\x1b\nsince=1\nrun=ab\n"),
       }) {
    EXPECT_FALSE(ParseLockRecord(bad).has_value()) << bad;
  }
  // A damaged record is no record: the folder is still usable.
  const std::string dir = FreshDir();
  std::ofstream(dir + "/.lock") << "garbage";
  auto lock = CheckpointDirLock::Take(dir);
  ASSERT_TRUE(lock.ok());
  EXPECT_FALSE((*lock)->previous().has_value());
}

}  // namespace
}  // namespace kiln::nn
