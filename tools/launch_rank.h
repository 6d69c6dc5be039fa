// Starting one rank: a child in its own process group, its output into launch's pipes, the
// environment's KILN_RANK and KILN_LOCAL_RANK set, then the program. Runs in the keeper.
#ifndef KILN_TOOLS_LAUNCH_RANK_H_
#define KILN_TOOLS_LAUNCH_RANK_H_

#include <signal.h>
#include <sys/types.h>

namespace kiln::launch {

// The write ends of a rank's stdout and stderr pipes.
struct RankPipes {
  int out = -1;
  int err = -1;
};

struct StartedRank {
  pid_t pid = -1;   // > 1 once forked: the rank's process, and its process group
  bool ok = false;  // false (reported): a call failed; the rank runs anyway when pid > 1
};

// Forks rank `index` running `args` (null-terminated) with signal mask `mask` and the default
// handlers.
StartedRank StartRank(int index, char* const* args, RankPipes pipes, const sigset_t& mask);

}  // namespace kiln::launch

#endif  // KILN_TOOLS_LAUNCH_RANK_H_
