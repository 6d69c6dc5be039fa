// The keeper of one run generation: a small process that launch forks first and that starts
// the generation's ranks, so that it, not launch, is their parent and, as a child subreaper,
// the parent of every process below them that loses its own. It tells launch each rank's pid
// and end over a pipe and forwards the signals launch asks it to. When launch says the
// generation is over, or when launch disappears, whatever ended it (SIGKILL included: launch's
// end of the control pipe closes), the keeper SIGKILLs every process below it until none is
// left (launch_reaper.h); in the second case it also removes launch's rendezvous folder.
//
// Why a keeper: launch cannot clean up after its own SIGKILL, and PR_SET_PDEATHSIG reaches only
// a direct child (and fires when the parent thread ends, not the process). A cgroup would hold
// every process wherever it moves, but making one needs a writable cgroupfs and delegation
// (root, or a systemd scope), which a user's shell, a container or a CI job often lacks.
#ifndef KILN_TOOLS_LAUNCH_KEEPER_H_
#define KILN_TOOLS_LAUNCH_KEEPER_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/launch_rank.h"

namespace kiln::launch {

// One message from the keeper: a rank started (its pid), a rank ended (its wait status), or a
// rank could not be started (the keeper printed why; the ranks after it are not started).
struct KeeperReport {
  enum Kind : int32_t { kRankStarted = 1, kRankExited = 2, kStartFailed = 3 };
  int32_t kind = 0;
  int32_t rank = 0;
  int32_t pid = 0;
  int32_t status = 0;
};

struct KeeperPlan {
  std::vector<char*> args;       // the program and its arguments, null-terminated
  std::vector<RankPipes> pipes;  // per rank; launch's copies are closed once the keeper has them
  std::vector<int> launch_only;  // launch's fds the keeper must not hold (the pipes' read ends)
  std::string rendezvous_dir;    // removed by the keeper should launch die; "" when not launch's
  int generation = 0;
};

// Launch's end of a running keeper.
class Keeper {
 public:
  // Forks the keeper, which starts the ranks at once; nullopt (reported) when a call fails.
  static std::optional<Keeper> Start(KeeperPlan& plan);

  pid_t pid() const { return pid_; }
  int reports() const { return reports_; }  // read end of its reports (non-blocking)
  bool finished() const { return control_ < 0; }

  // Asks the keeper to send `sig` to the process group of every rank still running.
  void Forward(int sig);
  // The generation is over: the keeper kills what is left, reports the ranks it reaps, exits.
  void Finish();

 private:
  pid_t pid_ = -1;
  int control_ = -1;
  int reports_ = -1;
};

}  // namespace kiln::launch

#endif  // KILN_TOOLS_LAUNCH_KEEPER_H_
