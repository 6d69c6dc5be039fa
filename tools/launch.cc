// launch: starts N ranks of a program on this machine, like `torchrun --standalone`.
//
//   launch --nproc=2 [--rendezvous=ADDR] [--grace=SECONDS] [--] program [args...]
//
// Each rank gets KILN_RANK, KILN_WORLD_SIZE, KILN_LOCAL_RANK, KILN_LOCAL_WORLD_SIZE,
// KILN_RENDEZVOUS (default: a fresh directory under $TMPDIR or /tmp, removed at the end), KILN_RUN_ID and KILN_HOST
// (127.0.0.1 unless set). Every line a rank prints is prefixed with "[rank N] " (stdout to
// stdout, stderr to stderr). SIGINT and SIGTERM are forwarded to every rank. When a rank
// fails (non-zero exit or a signal), the others get SIGTERM, then SIGKILL after the grace
// period, and launch exits with that rank's status (128 + signal for a signal). Usage errors
// exit 2.
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace {

using Clock = std::chrono::steady_clock;

int signal_pipe[2];

void OnSignal(int sig) {
  const unsigned char c = static_cast<unsigned char>(sig);
  const int saved = errno;
  (void)!write(signal_pipe[1], &c, 1);
  errno = saved;
}

struct Options {
  int nproc = 0;
  std::string rendezvous;
  double grace = 5;
  std::vector<std::string> command;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr, "launch: %s\nusage: launch --nproc=N [--rendezvous=file:///dir|redis://host:port] "
               "[--grace=SECONDS] [--] program [args...]\n", why.c_str());
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  int i = 1;
  for (; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (!absl::StartsWith(arg, "--")) break;
    if (absl::ConsumePrefix(&arg, "--nproc=")) {
      if (!absl::SimpleAtoi(arg, &o.nproc) || o.nproc < 1) Usage(absl::StrCat("--nproc=", arg, ": expected a number >= 1"));
    } else if (absl::ConsumePrefix(&arg, "--rendezvous=")) {
      o.rendezvous = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--grace=")) {
      if (!absl::SimpleAtod(arg, &o.grace) || o.grace < 0) Usage(absl::StrCat("--grace=", arg, ": expected seconds >= 0"));
    } else {
      Usage(absl::StrCat("unknown flag ", arg));
    }
  }
  if (o.nproc == 0) Usage("--nproc is required");
  for (; i < argc; ++i) o.command.push_back(argv[i]);
  if (o.command.empty()) Usage("no program to run");
  return o;
}

// One output stream of a rank: bytes in, whole prefixed lines out.
struct Stream {
  int fd = -1;
  int out = 1;
  std::string pending;
};

struct Rank {
  pid_t pid = -1;
  Stream streams[2];
  bool exited = false;
  int status = 0;
};

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += n;
  }
}

void Emit(Stream& s, const std::string& prefix, bool flush) {
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

std::string Describe(int status) {
  if (WIFSIGNALED(status)) return absl::StrCat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return absl::StrCat("exited with status ", WEXITSTATUS(status));
}

int ExitCode(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return remove(path); }

}  // namespace

int main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  std::string store_dir;
  if (o.rendezvous.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/kiln-launch-XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) Usage(absl::StrCat("cannot create a rendezvous directory: ", strerror(errno)));
    store_dir = tmpl;
    o.rendezvous = absl::StrCat("file://", store_dir);
  }
  std::random_device rd;
  const std::string run_id = absl::StrCat("launch-", getpid(), "-", rd() % 1000000);

  if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return 2;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGHUP}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::vector<Rank> ranks(o.nproc);
  for (int r = 0; r < o.nproc; ++r) {
    int pipes[2][2];
    if (pipe2(pipes[0], O_CLOEXEC) != 0 || pipe2(pipes[1], O_CLOEXEC) != 0) return 2;
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);  // its own process group: signals reach its children too, and only from here
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
      if (getppid() != parent) _exit(1);
      dup2(pipes[0][1], 1);
      dup2(pipes[1][1], 2);
      for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGHUP, SIGPIPE}) signal(sig, SIG_DFL);
      setenv("KILN_RANK", absl::StrCat(r).c_str(), 1);
      setenv("KILN_WORLD_SIZE", absl::StrCat(o.nproc).c_str(), 1);
      setenv("KILN_LOCAL_RANK", absl::StrCat(r).c_str(), 1);
      setenv("KILN_LOCAL_WORLD_SIZE", absl::StrCat(o.nproc).c_str(), 1);
      setenv("KILN_RENDEZVOUS", o.rendezvous.c_str(), 1);
      setenv("KILN_RUN_ID", run_id.c_str(), 1);
      setenv("KILN_HOST", "127.0.0.1", 0);
      std::vector<char*> args;
      for (auto& a : o.command) args.push_back(a.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      std::fprintf(stderr, "launch: cannot run %s: %s\n", args[0], strerror(errno));
      _exit(127);
    }
    setpgid(pid, pid);
    close(pipes[0][1]);
    close(pipes[1][1]);
    ranks[r].pid = pid;
    ranks[r].streams[0] = {pipes[0][0], 1, ""};
    ranks[r].streams[1] = {pipes[1][0], 2, ""};
  }

  std::optional<int> result;                  // the exit code, once decided
  std::optional<Clock::time_point> kill_at;   // SIGKILL to the stragglers after the grace period
  auto stop_all = [&](int sig) {
    for (const Rank& r : ranks) {
      if (!r.exited) kill(-r.pid, sig);
    }
    if (!kill_at) kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.grace));
  };

  int running = o.nproc;
  while (true) {
    std::vector<pollfd> fds{{signal_pipe[0], POLLIN, 0}};
    std::vector<Stream*> owners{nullptr};
    for (Rank& r : ranks) {
      for (Stream& s : r.streams) {
        if (s.fd >= 0) {
          fds.push_back({s.fd, POLLIN, 0});
          owners.push_back(&s);
        }
      }
    }
    if (running == 0 && fds.size() == 1) break;
    int wait_ms = 200;
    if (kill_at) {
      wait_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at - Clock::now()).count()));
      wait_ms = std::min(wait_ms, 200);
    }
    poll(fds.data(), fds.size(), wait_ms);
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Stream& s = *owners[i];
      char buf[65536];
      const ssize_t n = read(s.fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      int rank = 0;
      for (size_t k = 0; k < ranks.size(); ++k) {
        if (&ranks[k].streams[0] == &s || &ranks[k].streams[1] == &s) rank = static_cast<int>(k);
      }
      const std::string prefix = absl::StrCat("[rank ", rank, "] ");
      if (n <= 0) {
        Emit(s, prefix, true);
        close(s.fd);
        s.fd = -1;
      } else {
        s.pending.append(buf, n);
        Emit(s, prefix, false);
      }
    }
    unsigned char sig;
    while (read(signal_pipe[0], &sig, 1) == 1) {
      if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
        std::fprintf(stderr, "launch: got %s; forwarding it to every rank\n", strsignal(sig));
        if (!result) result = 128 + sig;
        stop_all(sig);
      }
    }
    // Reap.
    for (size_t k = 0; k < ranks.size(); ++k) {
      Rank& r = ranks[k];
      if (r.exited) continue;
      if (waitpid(r.pid, &r.status, WNOHANG) != r.pid) continue;
      r.exited = true;
      --running;
      const bool failed = !(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
      if (failed && !result) {
        result = ExitCode(r.status);
        std::fprintf(stderr, "launch: rank %zu (pid %d) %s; stopping the other ranks\n", k, r.pid,
                     Describe(r.status).c_str());
        stop_all(SIGTERM);
      }
    }
    if (kill_at && Clock::now() >= *kill_at && running > 0) {
      for (const Rank& r : ranks) {
        if (!r.exited) kill(-r.pid, SIGKILL);
      }
      kill_at = Clock::now() + std::chrono::hours(1);
    }
  }
  if (!store_dir.empty()) nftw(store_dir.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
  return result.value_or(0);
}
