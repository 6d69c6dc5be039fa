// launch: starts N ranks of a program on this machine, like `torchrun --standalone`.
//
//   launch --nproc=N [--rendezvous=ADDR] [--grace=SECONDS] [--max_restarts=R] [--] program [args...]
//
// Each rank gets KILN_RANK, KILN_WORLD_SIZE, KILN_LOCAL_RANK, KILN_LOCAL_WORLD_SIZE,
// KILN_RENDEZVOUS (default: a fresh directory under $TMPDIR or /tmp, removed at the end),
// KILN_RUN_ID, KILN_HOST (127.0.0.1 unless set) and KILN_RUN_TOKEN: the secret that every
// process-group connection of the run must prove, 32 bytes from getrandom(2) as 64 hex digits,
// fresh for each run. When launch's own environment has KILN_RUN_TOKEN (one run spread over
// several launches), it is passed through unchanged. launch never prints the token.
//
// Every line a rank prints is prefixed with "[rank N] " (stdout to stdout, stderr to stderr).
// SIGINT, SIGTERM and SIGHUP are forwarded to every rank. When a rank fails (non-zero exit or
// a signal), the others get SIGTERM, then SIGKILL after the grace period, and launch exits with
// that rank's status (128 + signal for a signal). When launch itself fails (a system call such
// as fork; the message names the call and the reason), it stops the ranks already started the
// same way and exits 1. Usage errors exit 2: N must be 1..1024, SECONDS 0..3600, R 0..1000000.
//
// --max_restarts=R (default 0: none), like torchrun's: when a rank fails, once every rank has
// been stopped as above and reaped, launch starts all N again, up to R times, with the same
// rendezvous address and run id and a new run generation, KILN_RESTART_COUNT (0 at the first
// start, then 1, 2, ...; ReadLaunchEnv gives it as restart_count and puts it in the run id, so
// each generation meets under its own store keys). A token launch made is made afresh for each
// generation, so no process of an earlier one can join a later one. A generation whose ranks
// all exit 0 ends launch with 0; after R restarts launch exits with the last failure's status.
// A signal to launch, or a failure of launch itself, ends it without a restart.
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "distributed/process/launch_env.h"
#include "tools/launch_options.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTokenBytes = 32;
using kiln::launch::Options;
using kiln::launch::Quote;
using kiln::launch::Usage;

int signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const unsigned char c = static_cast<unsigned char>(sig);
  const int saved = errno;
  (void)!write(signal_pipe[1], &c, 1);  // a full pipe drops it: the loop wakes up anyway
  errno = saved;
}

// Reports the system call that just failed, with errno's reason.
void Failed(const std::string& call) {
  const int error = errno;
  std::fprintf(stderr, "launch: %s failed: %s\n", call.c_str(), strerror(error));
}

// One output stream of a rank: bytes in, whole prefixed lines out.
struct Stream {
  int fd = -1;
  int out = 1;
  std::string pending;
};

struct Rank {
  int index = 0;
  pid_t pid = 0;  // > 1 once started: the rank's process, and its process group
  Stream streams[2];
  bool exited = false;
  int status = 0;
};

void WriteAll(int fd, const std::string& s) {
  static bool reported[3] = {};
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // The reader of launch's output went away: the ranks keep running, their output is lost.
      if (fd >= 0 && fd < 3 && !reported[fd]) {
        reported[fd] = true;
        Failed(absl::StrCat("write to ", fd == 1 ? "stdout" : "stderr"));
      }
      return;
    }
    done += n;
  }
}

void Emit(Rank& rank, Stream& s, bool flush) {
  const std::string prefix = absl::StrCat("[rank ", rank.index, "] ");
  size_t start = 0, nl;
  std::string out;
  while ((nl = s.pending.find('\n', start)) != std::string::npos) {
    out += prefix + s.pending.substr(start, nl - start + 1);
    start = nl + 1;
  }
  s.pending.erase(0, start);
  if (flush && !s.pending.empty()) {
    out += prefix + s.pending + "\n";
    s.pending.clear();
  }
  if (!out.empty()) WriteAll(s.out, out);
}

// Reads what the pipe holds now (its read end does not block), then prints the rest.
void CloseStream(Rank& rank, Stream& s) {
  if (s.fd < 0) return;
  char buf[65536];
  ssize_t n;
  for (int i = 0; i < 64 && (n = read(s.fd, buf, sizeof(buf))) > 0; ++i) s.pending.append(buf, n);
  Emit(rank, s, true);
  close(s.fd);
  s.fd = -1;
}

// How a rank ended: "exited with status 1", "was killed by signal 9 (Killed)".
std::string Describe(int status) {
  if (WIFSIGNALED(status))
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return absl::StrCat("exited with status ", WEXITSTATUS(status));
}

int ExitCode(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

// Sends `sig` to a rank's process group, which holds its children too. Only to a started rank
// that has not been reaped: kill(-1) would signal every process launch may signal (as root: all
// of them), and a reaped rank's pid may belong to someone else by now.
void Signal(const Rank& r, int sig) {
  if (r.pid <= 1 || r.exited) return;
  if (kill(-r.pid, sig) == 0 || errno == ESRCH) return;  // ESRCH: its group is gone already
  Failed(absl::StrCat("kill(", -r.pid, ", ", sigabbrev_np(sig), ") for rank ", r.index));
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return remove(path); }

// `bytes` random bytes from getrandom(2) as hex digits; nullopt (reported) when it fails.
std::optional<std::string> RandomHex(size_t bytes, const std::string& what) {
  std::string raw(bytes, '\0');
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = getrandom(raw.data() + done, bytes - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Failed(absl::StrCat("getrandom for ", what));
      return std::nullopt;
    }
    done += n;
  }
  return absl::BytesToHexString(raw);
}

bool InstallSignalHandlers() {
  if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    Failed("pipe2 for the signal pipe");
    return false;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGHUP}) {
    if (sigaction(sig, &sa, nullptr) != 0) {
      Failed(absl::StrCat("sigaction(", sigabbrev_np(sig), ")"));
      return false;
    }
  }
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  if (sigaction(SIGPIPE, &ignore, nullptr) != 0) {  // a closed stdout must not kill launch
    Failed("sigaction(PIPE)");
    return false;
  }
  return true;
}

// The variables every rank of every generation shares, set in launch's environment for the
// ranks to inherit.
bool SetSharedEnvironment(const Options& o, const std::string& run_id) {
  std::vector<std::pair<const char*, std::string>> vars = {{"KILN_WORLD_SIZE", absl::StrCat(o.nproc)},
                                                           {"KILN_LOCAL_WORLD_SIZE", absl::StrCat(o.nproc)},
                                                           {"KILN_RENDEZVOUS", o.rendezvous},
                                                           {"KILN_RUN_ID", run_id}};
  if (std::getenv("KILN_HOST") == nullptr) vars.push_back({"KILN_HOST", "127.0.0.1"});
  for (const auto& [name, value] : vars) {
    if (setenv(name, value.c_str(), 1) != 0) {
      Failed(absl::StrCat("setenv(", name, ")"));
      return false;
    }
  }
  return true;
}

// The variables of one run generation: its number and, when launch makes the token, a fresh
// one, which a process left over from an earlier generation cannot prove.
bool SetGeneration(int generation, bool own_token) {
  if (own_token) {
    std::optional<std::string> token = RandomHex(kTokenBytes, "the run token");
    if (!token) return false;
    if (setenv("KILN_RUN_TOKEN", token->c_str(), 1) != 0) {
      Failed("setenv(KILN_RUN_TOKEN)");
      return false;
    }
  }
  if (setenv("KILN_RESTART_COUNT", absl::StrCat(generation).c_str(), 1) != 0) {
    Failed("setenv(KILN_RESTART_COUNT)");
    return false;
  }
  return true;
}

// In the child: the rank's own process group, its output into the pipes, then the program.
[[noreturn]] void RunRank(int index, std::vector<char*>& args, int out, int err, pid_t parent, const sigset_t& mask) {
  const auto fail = [index](const char* call) {
    Failed(absl::StrCat(call, " for rank ", index));
    _exit(126);
  };
  // Its own group: launch's signals reach the rank's children too, and the terminal's Ctrl-C
  // reaches launch only, which forwards it.
  if (setpgid(0, 0) != 0) fail("setpgid");
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail("prctl(PR_SET_PDEATHSIG)");  // never outlive launch
  if (getppid() != parent) _exit(1);                                           // launch died before prctl took effect
  if (dup2(out, 1) < 0 || dup2(err, 2) < 0) fail("dup2");
  for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGHUP, SIGPIPE}) signal(sig, SIG_DFL);
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  execvp(args[0], args.data());
  std::fprintf(stderr, "launch: cannot run %s: %s\n", args[0], strerror(errno));
  _exit(127);
}

// Starts rank `rank.index`. False (reported) when a system call failed; the rank is running
// anyway when rank.pid > 1.
bool StartRank(std::vector<char*>& args, Rank& rank) {
  const int r = rank.index;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    Failed(absl::StrCat("pipe2 for rank ", r));
    return false;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    Failed(absl::StrCat("pipe2 for rank ", r));
    close(out[0]);
    close(out[1]);
    return false;
  }
  if (setenv("KILN_RANK", absl::StrCat(r).c_str(), 1) != 0 ||
      setenv("KILN_LOCAL_RANK", absl::StrCat(r).c_str(), 1) != 0) {
    Failed(absl::StrCat("setenv for rank ", r));
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return false;
  }
  // Signals wait until the child has reset its handlers: one caught by launch's handler in the
  // child would reach launch's signal pipe and pass for a signal sent to launch.
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) RunRank(r, args, out[1], err[1], parent, old);
  const int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    errno = fork_errno;
    Failed(absl::StrCat("fork for rank ", r));
    close(out[0]);
    close(err[0]);
    return false;
  }
  rank.pid = pid;
  rank.streams[0] = {out[0], 1, ""};
  rank.streams[1] = {err[0], 2, ""};
  // Non-blocking, so that the last read before closing (CloseStream) cannot hang on a pipe that
  // a rank's child still holds open.
  for (int fd : {out[0], err[0]}) {
    if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0) {
      Failed(absl::StrCat("fcntl(O_NONBLOCK) for rank ", r));
      return false;
    }
  }
  // Here too, not only in the child: until the group exists, kill(-pid) would miss the rank.
  // EACCES: the child has run exec, so it made its group itself; ESRCH: it has exited already.
  if (setpgid(pid, pid) != 0 && errno != EACCES && errno != ESRCH) {
    Failed(absl::StrCat("setpgid for rank ", r));
    return false;
  }
  return true;
}

// How one generation of ranks ended.
struct Outcome {
  int code = 0;  // launch's exit status, were it to end here
  // The rank whose failure ended the generation, and its wait status; unset when the ranks
  // all exited 0, or when a signal to launch or a failure of launch came first.
  std::optional<int> failed_rank;
  int failed_status = 0;
  bool interrupted = false;  // a signal to launch or a failure of launch: no restart
};

// Forwards the ranks' output and signals until every rank has exited. `result` is already set
// when launch failed while starting them. `generation` is added to the failure message ("" or
// " in generation G").
Outcome Supervise(std::vector<Rank>& ranks, Clock::duration grace, std::optional<int> result,
                  const std::string& generation) {
  Outcome outcome;
  outcome.interrupted = result.has_value();
  std::optional<Clock::time_point> kill_at;  // SIGKILL to the stragglers after the grace period
  bool killed = false;
  auto stop_all = [&](int sig) {
    for (const Rank& r : ranks) Signal(r, sig);
    if (!kill_at) kill_at = Clock::now() + grace;
  };
  if (result) stop_all(SIGTERM);

  // Once every rank has exited, output that their children hold open is waited for only this long.
  std::optional<Clock::time_point> drain_until;
  bool poll_failed = false;
  size_t running = ranks.size();
  while (true) {
    std::vector<pollfd> fds{{signal_pipe[0], POLLIN, 0}};
    std::vector<std::pair<Rank*, Stream*>> owners{{nullptr, nullptr}};
    for (Rank& r : ranks) {
      for (Stream& s : r.streams) {
        if (s.fd >= 0) {
          fds.push_back({s.fd, POLLIN, 0});
          owners.push_back({&r, &s});
        }
      }
    }
    const Clock::time_point now = Clock::now();
    if (running == 0) {
      if (!drain_until) drain_until = now + grace;
      if (fds.size() == 1 || now >= *drain_until) break;
    }
    Clock::duration wait = std::chrono::milliseconds(200);
    if (kill_at && !killed) wait = std::min(wait, *kill_at - now);
    if (drain_until) wait = std::min(wait, *drain_until - now);
    const int wait_ms =
        static_cast<int>(std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(wait).count()));
    if (poll_failed) {
      usleep(wait_ms * 1000);
    } else if (poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) {
      // Without poll the output cannot be forwarded: stop the run, but still reap every rank.
      Failed("poll");
      poll_failed = true;
      outcome.interrupted = true;
      if (!result) result = 1;
      stop_all(SIGTERM);
      for (Rank& r : ranks) {
        for (Stream& s : r.streams) CloseStream(r, s);
      }
      continue;
    }
    for (size_t i = 1; i < fds.size() && !poll_failed; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL))) continue;
      auto [rank, s] = owners[i];
      char buf[65536];
      const ssize_t n = read(s->fd, buf, sizeof(buf));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0) Failed(absl::StrCat("read of rank ", rank->index, "'s ", s->out == 1 ? "stdout" : "stderr"));
      if (n <= 0) {
        CloseStream(*rank, *s);
      } else {
        s->pending.append(buf, n);
        Emit(*rank, *s, false);
      }
    }
    unsigned char sig;
    ssize_t got;
    while ((got = read(signal_pipe[0], &sig, 1)) == 1) {
      if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
        std::fprintf(stderr, "launch: got %s; forwarding it to every rank\n", strsignal(sig));
        outcome.interrupted = true;
        if (!result) result = 128 + sig;
        stop_all(sig);
      }
    }
    if (got < 0 && errno != EAGAIN && errno != EINTR) Failed("read of the signal pipe");
    // Reap each rank by its own pid: waitpid(-1) would take another rank's status.
    for (Rank& r : ranks) {
      if (r.exited) continue;
      const pid_t done = waitpid(r.pid, &r.status, WNOHANG);
      if (done == 0 || (done < 0 && errno == EINTR)) continue;
      if (done < 0) {
        // Not launch's child any more (ECHILD): its status is lost, and waiting would never end.
        Failed(absl::StrCat("waitpid for rank ", r.index, " (pid ", r.pid, ")"));
        r.exited = true;
        --running;
        outcome.interrupted = true;
        if (!result) result = 1;
        stop_all(SIGTERM);
        continue;
      }
      r.exited = true;
      --running;
      const bool failed = !(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
      if (failed && !result) {
        result = ExitCode(r.status);
        outcome.failed_rank = r.index;
        outcome.failed_status = r.status;
        std::fprintf(stderr, "launch: rank %d (pid %d) %s%s; stopping the other ranks\n", r.index, r.pid,
                     Describe(r.status).c_str(), generation.c_str());
        stop_all(SIGTERM);
      }
    }
    if (kill_at && !killed && Clock::now() >= *kill_at && running > 0) {
      for (const Rank& r : ranks) Signal(r, SIGKILL);
      killed = true;
    }
  }
  for (Rank& r : ranks) {
    for (Stream& s : r.streams) CloseStream(r, s);
  }
  outcome.code = result.value_or(0);
  return outcome;
}

// A SIGINT, SIGTERM or SIGHUP that reached launch after the last generation's ranks were
// reaped (0: none): it must not be answered by starting them again.
int PendingStopSignal() {
  unsigned char sig;
  int stop = 0;
  while (read(signal_pipe[0], &sig, 1) == 1) {
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) stop = sig;
  }
  return stop;
}

// Starts the ranks of one generation and supervises them until they have all exited.
Outcome RunGeneration(const Options& o, std::vector<char*>& args, const std::string& generation) {
  std::vector<Rank> ranks;
  ranks.reserve(o.nproc);
  std::optional<int> result;
  for (int r = 0; r < o.nproc; ++r) {
    Rank rank;
    rank.index = r;
    const bool ok = StartRank(args, rank);
    if (rank.pid > 1) ranks.push_back(std::move(rank));
    if (!ok) {
      std::fprintf(stderr, "launch: stopping the %zu rank(s) already started\n", ranks.size());
      result = 1;
      break;
    }
  }
  return Supervise(ranks, std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.grace)), result,
                   generation);
}

int Run(const Options& o) {
  if (!InstallSignalHandlers()) return 1;
  const std::optional<std::string> id = RandomHex(3, "the run id");
  if (!id) return 1;
  const std::string run_id = absl::StrCat("launch-", getpid(), "-", *id);
  const bool own_token = std::getenv("KILN_RUN_TOKEN") == nullptr;
  if (!SetSharedEnvironment(o, run_id)) return 1;

  std::vector<std::string> command = o.command;
  std::vector<char*> args;
  for (std::string& a : command) args.push_back(a.data());
  args.push_back(nullptr);

  for (int generation = 0;; ++generation) {
    if (!SetGeneration(generation, own_token)) return 1;
    // Without restarts, messages stay as they were before generations existed.
    const Outcome out =
        RunGeneration(o, args, o.max_restarts > 0 ? absl::StrCat(" in generation ", generation) : std::string());
    if (!out.failed_rank || out.interrupted || o.max_restarts == 0) return out.code;
    const std::string failure =
        absl::StrCat("rank ", *out.failed_rank, " ", Describe(out.failed_status), " in generation ", generation);
    if (generation == o.max_restarts) {
      std::fprintf(stderr, "launch: giving up after %d restart(s): %s; exiting with status %d\n", o.max_restarts,
                   failure.c_str(), out.code);
      return out.code;
    }
    if (const int sig = PendingStopSignal(); sig != 0) {
      std::fprintf(stderr, "launch: got %s; not restarting\n", strsignal(sig));
      return out.code;
    }
    std::fprintf(stderr, "launch: restart %d of %d: %s; starting all %d rank(s) again as generation %d\n",
                 generation + 1, o.max_restarts, failure.c_str(), o.nproc, generation + 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A closed stdin, stdout or stderr would be reused by the next pipe, and a rank's dup2 onto
  // it would then do nothing: it gets /dev/null instead.
  for (int fd = 0; fd < 3; ++fd) {
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", O_RDWR) != fd) return 1;
  }
  Options o = kiln::launch::ParseOptions(argc, argv);
  std::string store_dir;
  if (o.rendezvous.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    const std::string pattern = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/kiln-launch-XXXXXX");
    std::string tmpl = pattern;  // mkdtemp fills in the X's even when it fails
    if (mkdtemp(tmpl.data()) == nullptr) {
      Failed(absl::StrCat("mkdtemp for the rendezvous directory ", Quote(pattern)));
      return 1;
    }
    store_dir = tmpl;
    o.rendezvous = absl::StrCat("file://", store_dir);
    if (absl::Status s = kiln::distributed::CheckRendezvousAddress(o.rendezvous); !s.ok()) {
      rmdir(store_dir.c_str());
      Usage(absl::StrCat("TMPDIR gives a rendezvous address that ranks cannot use: ", s.message()));
    }
  }
  const int code = Run(o);
  if (!store_dir.empty() && nftw(store_dir.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
    Failed(absl::StrCat("removing the rendezvous directory ", store_dir));
  }
  return code;
}
