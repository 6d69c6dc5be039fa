// launch: starts N ranks of a program on this machine, like `torchrun --standalone`.
//
//   launch --nproc=N [--rendezvous=ADDR] [--grace=SECONDS] [--max_restarts=R]
//          [--restart_backoff=SECONDS] [--] program [args...]
//
// Each rank gets KILN_RANK, KILN_WORLD_SIZE, KILN_LOCAL_RANK, KILN_LOCAL_WORLD_SIZE,
// KILN_RENDEZVOUS (default: a fresh folder kiln-launch-<pid>-XXXXXX under $TMPDIR or /tmp,
// removed at the end; launch_rendezvous_dir.h), KILN_RUN_ID, KILN_HOST (127.0.0.1 unless set)
// and KILN_RUN_TOKEN: the secret that every process-group connection of the run must prove, 32
// bytes from getrandom(2) as 64 hex digits, fresh for each run. When launch's own environment
// has KILN_RUN_TOKEN (one run spread over several launches), it is passed through unchanged.
// launch never prints the token.
//
// Every line a rank prints is prefixed with "[rank N] " (stdout to stdout, stderr to stderr).
// SIGINT, SIGTERM and SIGHUP are forwarded to every rank. When a rank fails (non-zero exit or
// a signal), the others get SIGTERM, and launch exits with that rank's status (128 + signal for
// a signal). When launch itself fails (a system call such as fork; the message names the call
// and the reason), it stops the ranks already started the same way and exits 1. Usage errors
// exit 2: N must be 1..1024, SECONDS 0..3600 (back-off 0..60), R 0..1000000.
//
// Nothing of a generation outlives it: its ranks are started by a keeper process
// (launch_keeper.h), a child subreaper that every process below the ranks falls back to. When
// the ranks have exited (and their output has ended, or had --grace seconds), or --grace
// seconds after they were told to stop, every process left below the keeper (children that
// ignore SIGTERM, left their process group or session, or were orphaned) gets SIGKILL, and the
// generation ends once none is left. Should launch itself disappear, SIGKILL included, the
// keeper does the same and removes the rendezvous folder.
//
// --max_restarts=R (default 0: none), like torchrun's: when a rank fails, once every process
// of the generation is gone, launch starts all N again, up to R times, with the same
// rendezvous address and run id and a new run generation, KILN_RESTART_COUNT (0 at the first
// start, then 1, 2, ...; ReadLaunchEnv gives it as restart_count and puts it in the run id, so
// each generation meets under its own store keys). A token launch made is made afresh for each
// generation, so no process of an earlier one can join a later one. Before restart k, launch
// waits --restart_backoff seconds (default 1) times 2^(k-1), at most 60 s. A generation whose
// ranks all exit 0 ends launch with 0; after R restarts launch exits with the last failure's
// status. No restart follows a signal to launch (during the back-off too: launch ends at
// once), a failure of launch itself, or a rank's exit status 2 (bad input, which a restart
// would meet again: launch exits 2).
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "distributed/process/launch_env.h"
#include "tools/launch_backoff.h"
#include "tools/launch_generation.h"
#include "tools/launch_messages.h"
#include "tools/launch_options.h"
#include "tools/launch_rendezvous_dir.h"
#include "tools/launch_signals.h"

namespace {

using kiln::launch::Failed;
using kiln::launch::Options;

constexpr int kTokenBytes = 32;

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

// After generation `generation` failed: whether to start the next one (after the back-off),
// or the status launch exits with.
std::optional<int> RestartOrExit(const Options& o, const kiln::launch::Outcome& out, int generation) {
  const std::string failure = absl::StrCat("rank ", *out.failed_rank, " ", kiln::launch::Describe(out.failed_status),
                                           " in generation ", generation);
  if (WIFEXITED(out.failed_status) && WEXITSTATUS(out.failed_status) == 2) {
    std::fprintf(stderr, "launch: not restarting: %s (bad input; a restart would fail the same way)\n",
                 failure.c_str());
    return 2;
  }
  if (generation == o.max_restarts) {
    std::fprintf(stderr, "launch: giving up after %d restart(s): %s; exiting with status %d\n", o.max_restarts,
                 failure.c_str(), out.code);
    return out.code;
  }
  if (const int sig = kiln::launch::PendingStopSignal(); sig != 0) {
    std::fprintf(stderr, "launch: got %s; not restarting\n", strsignal(sig));
    return out.code;
  }
  const int next = generation + 1;
  std::fprintf(stderr, "launch: restart %d of %d: %s; starting all %d rank(s) again as generation %d\n", next,
               o.max_restarts, failure.c_str(), o.nproc, next);
  const double delay = kiln::launch::RestartDelay(o.restart_backoff, next);
  std::fprintf(stderr, "launch: restarting in %s s (generation %d of %d)\n", absl::StrCat(delay).c_str(), next,
               o.max_restarts);
  const auto wait =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(delay));
  if (const int sig = kiln::launch::WaitForStopSignal(wait); sig != 0) {
    std::fprintf(stderr, "launch: got %s during the back-off; not restarting\n", strsignal(sig));
    return out.code;
  }
  return std::nullopt;
}

int Run(const Options& o, const std::string& rendezvous_dir) {
  const std::optional<std::string> id = RandomHex(3, "the run id");
  if (!id) return 1;
  const std::string run_id = absl::StrCat("launch-", getpid(), "-", *id);
  const bool own_token = std::getenv("KILN_RUN_TOKEN") == nullptr;
  if (!SetSharedEnvironment(o, run_id)) return 1;

  std::vector<std::string> command = o.command;
  kiln::launch::GenerationPlan plan;
  plan.nproc = o.nproc;
  for (std::string& a : command) plan.args.push_back(a.data());
  plan.args.push_back(nullptr);
  plan.grace = std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(o.grace));
  plan.rendezvous_dir = rendezvous_dir;
  for (int generation = 0;; ++generation) {
    if (!SetGeneration(generation, own_token)) return 1;
    plan.generation = generation;
    // Without restarts, messages stay as they were before generations existed.
    plan.label = o.max_restarts > 0 ? absl::StrCat(" in generation ", generation) : std::string();
    const kiln::launch::Outcome out = kiln::launch::RunGeneration(plan);
    if (!out.failed_rank || out.interrupted || o.max_restarts == 0) return out.code;
    if (const std::optional<int> code = RestartOrExit(o, out, generation)) return *code;
  }
}

// Launch's own rendezvous folder in TMPDIR (after removing those that launches now gone left
// there), and the address the ranks get; exits when there is none.
kiln::launch::RendezvousDir MakeOwnRendezvous(Options& o) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  kiln::launch::ReclaimRendezvousDirs(parent);
  std::optional<kiln::launch::RendezvousDir> dir = kiln::launch::MakeRendezvousDir(parent);
  if (!dir) std::exit(1);
  o.rendezvous = absl::StrCat("file://", dir->path);
  if (absl::Status s = kiln::distributed::CheckRendezvousAddress(o.rendezvous); !s.ok()) {
    rmdir(dir->path.c_str());
    kiln::launch::Usage(absl::StrCat("TMPDIR gives a rendezvous address that ranks cannot use: ", s.message()));
  }
  return *dir;
}

int Main(int argc, char** argv) {
  // A closed stdin, stdout or stderr would be reused by the next pipe, and a rank's dup2 onto
  // it would then do nothing: it gets /dev/null instead.
  for (int fd = 0; fd < 3; ++fd) {
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", O_RDWR) != fd) return 1;
  }
  Options o = kiln::launch::ParseOptions(argc, argv);
  // Launch reaps what its keeper leaves, should the keeper itself be killed.
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    Failed("prctl(PR_SET_CHILD_SUBREAPER)");
    return 1;
  }
  if (!kiln::launch::InstallSignalHandlers()) return 1;
  kiln::launch::RendezvousDir dir;
  if (o.rendezvous.empty()) dir = MakeOwnRendezvous(o);
  const int code = Run(o, dir.path);
  if (!dir.path.empty()) kiln::launch::RemoveTree(dir.path);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // Whatever escapes ends launch with a message, not an abort; its keeper, seeing launch gone,
  // still stops the ranks and removes the rendezvous folder.
  try {
    return Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "launch: out of memory (std::bad_alloc)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch: %s\n", e.what());
  }
  return 1;
}
