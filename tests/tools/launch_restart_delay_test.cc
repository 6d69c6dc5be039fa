// launch's back-off before each restart: doubling from --restart_backoff, never above a minute
// (what launch_backoff_test cannot wait for), and no overflow at the millionth restart.
#include <gtest/gtest.h>

#include "tools/launch_backoff.h"

namespace kiln::launch {
namespace {

TEST(RestartDelayTest, DoublesFromTheFirstUpToAMinute) {
  const double want[] = {1, 2, 4, 8, 16, 32, 60, 60, 60};
  for (int restart = 1; restart <= 9; ++restart) EXPECT_EQ(RestartDelay(1, restart), want[restart - 1]) << restart;
  EXPECT_EQ(RestartDelay(0.5, 1), 0.5);
  EXPECT_EQ(RestartDelay(0.5, 3), 2);
  EXPECT_EQ(RestartDelay(45, 2), 60);
  EXPECT_EQ(RestartDelay(60, 1), 60);
}

TEST(RestartDelayTest, NoneStaysNone) {
  EXPECT_EQ(RestartDelay(0, 1), 0);
  EXPECT_EQ(RestartDelay(0, 1000000), 0);
}

TEST(RestartDelayTest, TheMillionthRestartWaitsAMinute) { EXPECT_EQ(RestartDelay(0.001, 1000000), 60); }

}  // namespace
}  // namespace kiln::launch
