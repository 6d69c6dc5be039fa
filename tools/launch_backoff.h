// How long tools/launch waits before a restart: --restart_backoff seconds before the first,
// doubling after each failed generation, at most a minute (a rank that always fails then costs
// one start a minute, not thirty a second).
#ifndef KILN_TOOLS_LAUNCH_BACKOFF_H_
#define KILN_TOOLS_LAUNCH_BACKOFF_H_

namespace kiln::launch {

inline constexpr double kMaxRestartBackoffSeconds = 60;

// Seconds before restart `restart` (1 for the first): first * 2^(restart - 1), at most
// kMaxRestartBackoffSeconds (and `first` itself when that is more).
double RestartDelay(double first, int restart);

}  // namespace kiln::launch

#endif  // KILN_TOOLS_LAUNCH_BACKOFF_H_
