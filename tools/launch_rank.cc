#include "tools/launch_rank.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tools/launch_messages.h"

namespace kiln::launch {
namespace {

// In the child: the rank's own process group, its output into the pipes, then the program.
[[noreturn]] void ExecRank(int index, char* const* args, RankPipes pipes, pid_t parent, const sigset_t& mask) {
  const auto fail = [index](const char* call) {
    Failed(absl::StrCat(call, " for rank ", index));
    _exit(126);
  };
  // Its own group: a forwarded signal reaches the rank's children too, and the terminal's
  // Ctrl-C reaches launch only, which forwards it.
  if (setpgid(0, 0) != 0) fail("setpgid");
  // A fast path only: the keeper's end kills all that is below it, this rank included.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail("prctl(PR_SET_PDEATHSIG)");
  if (getppid() != parent) _exit(1);  // the keeper died before prctl took effect
  if (dup2(pipes.out, 1) < 0 || dup2(pipes.err, 2) < 0) fail("dup2");
  for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGHUP, SIGPIPE, SIGTTOU}) signal(sig, SIG_DFL);
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  execvp(args[0], args);
  std::fprintf(stderr, "launch: cannot run %s: %s\n", args[0], strerror(errno));
  _exit(127);
}

}  // namespace

StartedRank StartRank(int index, char* const* args, RankPipes pipes, const sigset_t& mask) {
  StartedRank started;
  if (setenv("KILN_RANK", absl::StrCat(index).c_str(), 1) != 0 ||
      setenv("KILN_LOCAL_RANK", absl::StrCat(index).c_str(), 1) != 0) {
    Failed(absl::StrCat("setenv for rank ", index));
    return started;
  }
  const pid_t parent = getpid();
  started.pid = fork();
  if (started.pid == 0) ExecRank(index, args, pipes, parent, mask);
  if (started.pid < 0) {
    Failed(absl::StrCat("fork for rank ", index));
    return started;
  }
  // Here too, not only in the child: until the group exists, kill(-pid) would miss the rank.
  // EACCES: the child has run exec, so it made its group itself; ESRCH: it has exited already.
  if (setpgid(started.pid, started.pid) != 0 && errno != EACCES && errno != ESRCH) {
    Failed(absl::StrCat("setpgid for rank ", index));
    return started;
  }
  started.ok = true;
  return started;
}

}  // namespace kiln::launch
