#include "tools/launch_keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "tools/launch_messages.h"
#include "tools/launch_reaper.h"
#include "tools/launch_rendezvous_dir.h"
#include "tools/launch_signals.h"

namespace kiln::launch {
namespace {

// On the control pipe: the generation is over. Every other byte is a signal to forward.
constexpr unsigned char kFinish = 0;

// The keeper's side of a generation.
struct KeeperState {
  const KeeperPlan& plan;
  pid_t launch = 0;
  int control = -1;                        // read end: launch's requests; its end closing says launch is gone
  int reports = -1;                        // write end
  std::unordered_map<pid_t, int> running;  // rank pids, not yet reaped -> rank
};

void Report(const KeeperState& k, KeeperReport r) {
  // Smaller than PIPE_BUF, so written whole; with launch gone nobody reads, and that is fine.
  while (write(k.reports, &r, sizeof(r)) < 0 && errno == EINTR) {
  }
}

void OnReaped(KeeperState& k, pid_t pid, int status) {
  const auto it = k.running.find(pid);
  if (it == k.running.end()) return;  // a process below a rank, adopted and reaped
  Report(k, {KeeperReport::kRankExited, it->second, pid, status});
  k.running.erase(it);
}

// Leaves launch's process group, so that a signal to the whole group (timeout(1) sends its
// SIGKILL so) cannot end launch and its keeper at once; leaves the stop signals to launch;
// takes SIGCHLD through a signalfd; becomes a child subreaper. The signalfd, or -1 (reported).
int SetUpKeeper() {
  if (setpgid(0, 0) != 0) {
    Failed("setpgid in the keeper");
    return -1;
  }
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = SIG_IGN;
  // SIGTTOU: out of the terminal's foreground group now, a keeper that prints must not stop.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGTTOU}) sigaction(sig, &action, nullptr);
  action.sa_handler = SIG_DFL;  // not SIG_IGN: that would reap the children unseen
  sigaction(SIGCHLD, &action, nullptr);
  sigset_t child;
  sigemptyset(&child);
  sigaddset(&child, SIGCHLD);
  sigprocmask(SIG_SETMASK, &child, nullptr);
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    Failed("prctl(PR_SET_CHILD_SUBREAPER) in the keeper");
    return -1;
  }
  const int fd = signalfd(-1, &child, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) Failed("signalfd in the keeper");
  return fd;
}

void StartRanks(KeeperState& k, const sigset_t& rank_mask) {
  const std::vector<RankPipes>& pipes = k.plan.pipes;
  for (size_t r = 0; r < pipes.size(); ++r) {
    const StartedRank s = StartRank(static_cast<int>(r), k.plan.args.data(), pipes[r], rank_mask);
    close(pipes[r].out);
    close(pipes[r].err);
    if (s.pid > 0) {
      k.running[s.pid] = static_cast<int>(r);
      Report(k, {KeeperReport::kRankStarted, static_cast<int32_t>(r), s.pid, 0});
    }
    if (!s.ok) {
      Report(k, {KeeperReport::kStartFailed, static_cast<int32_t>(r), 0, 0});
      for (size_t rest = r + 1; rest < pipes.size(); ++rest) {
        close(pipes[rest].out);
        close(pipes[rest].err);
      }
      return;
    }
  }
}

// To running ranks only: a reaped rank's pid (its group's id) may belong to another process by now.
void Forward(const KeeperState& k, int sig) {
  for (const auto& [pid, rank] : k.running) {
    if (kill(-pid, sig) != 0 && errno != ESRCH)
      Failed(absl::StrCat("kill(", -pid, ", ", sigabbrev_np(sig), ") for rank ", rank));
  }
}

[[noreturn]] void End(KeeperState& k, bool launch_gone) {
  const std::string& dir = k.plan.rendezvous_dir;
  if (launch_gone) {
    const std::string removing = dir.empty() ? "" : absl::StrCat(" and removing ", dir);
    std::fprintf(stderr,
                 "launch: keeper of generation %d: launch (pid %d) is gone; killing what is left of the generation%s\n",
                 k.plan.generation, static_cast<int>(k.launch), removing.c_str());
  }
  KillDescendants([&k](pid_t pid, int status) { OnReaped(k, pid, status); });
  if (launch_gone && !dir.empty()) RemoveTree(dir);
  _exit(0);
}

// Serves launch's requests and reaps, until launch ends the generation or disappears.
[[noreturn]] void Serve(KeeperState& k, int child_signals) {
  pollfd fds[2] = {{k.control, POLLIN, 0}, {child_signals, POLLIN, 0}};
  while (true) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      Failed("poll in the keeper");
      End(k, false);  // launch sees the keeper end before it asked, and stops
    }
    if (fds[1].revents != 0) {
      signalfd_siginfo info;
      while (read(child_signals, &info, sizeof(info)) > 0) {
      }
      ReapChildren([&k](pid_t pid, int status) { OnReaped(k, pid, status); });
    }
    if (fds[0].revents != 0) {
      unsigned char requests[64];
      const ssize_t n = read(k.control, requests, sizeof(requests));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) End(k, true);
      for (ssize_t i = 0; i < n; ++i) {
        if (requests[i] == kFinish) End(k, false);
        Forward(k, requests[i]);
      }
    }
  }
}

[[noreturn]] void RunKeeper(const KeeperPlan& plan, pid_t launch, int control, int reports, const sigset_t& rank_mask) {
  const int child_signals = SetUpKeeper();
  if (child_signals < 0) _exit(1);
  KeeperState k{plan, launch, control, reports, {}};
  StartRanks(k, rank_mask);
  Serve(k, child_signals);
}

// The control and report pipes; false (reported) when pipe2 fails.
bool MakePipes(int control[2], int reports[2]) {
  if (pipe2(control, O_CLOEXEC) != 0) {
    Failed("pipe2 for the keeper");
    return false;
  }
  if (pipe2(reports, O_CLOEXEC) != 0) {
    Failed("pipe2 for the keeper");
    close(control[0]);
    close(control[1]);
    return false;
  }
  return true;
}

// Forks the keeper; its pid, or -1 (errno set). Signals wait until the keeper has set its own
// handlers: one caught by launch's handler in the keeper would pass for a signal sent to launch.
pid_t ForkKeeper(const KeeperPlan& plan, const int control[2], const int reports[2]) {
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);
  const pid_t launch = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    for (int fd : {control[1], reports[0]}) close(fd);
    for (int fd : plan.launch_only) close(fd);
    CloseSignalPipe();
    RunKeeper(plan, launch, control[0], reports[1], old);
  }
  const int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  errno = fork_errno;
  return pid;
}

}  // namespace

std::optional<Keeper> Keeper::Start(KeeperPlan& plan) {
  int control[2], reports[2];
  const bool piped = MakePipes(control, reports);
  const pid_t pid = piped ? ForkKeeper(plan, control, reports) : -1;
  const int fork_errno = errno;
  for (const RankPipes& p : plan.pipes) {  // the keeper's now
    close(p.out);
    close(p.err);
  }
  if (!piped) return std::nullopt;
  close(control[0]);
  close(reports[1]);
  Keeper keeper;
  keeper.control_ = control[1];
  keeper.reports_ = reports[0];
  if (pid < 0) {
    errno = fork_errno;
    Failed("fork for the keeper");
    keeper.Finish();
    close(reports[0]);
    return std::nullopt;
  }
  keeper.pid_ = pid;
  if (fcntl(reports[0], F_SETFL, O_NONBLOCK) != 0) {
    Failed("fcntl(O_NONBLOCK) for the keeper's reports");
    keeper.Finish();  // the keeper kills the ranks it started, and ends
    close(reports[0]);
    waitpid(pid, nullptr, 0);
    return std::nullopt;
  }
  return keeper;
}

void Keeper::Forward(int sig) {
  const unsigned char request = static_cast<unsigned char>(sig);
  // A keeper gone (EPIPE) is seen on its report pipe.
  if (control_ >= 0) (void)!write(control_, &request, 1);
}

void Keeper::Finish() {
  if (control_ < 0) return;
  const unsigned char request = kFinish;
  (void)!write(control_, &request, 1);
  close(control_);
  control_ = -1;
}

}  // namespace kiln::launch
