#include "tools/launch_signals.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tools/launch_messages.h"

namespace kiln::launch {
namespace {

int signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const unsigned char c = static_cast<unsigned char>(sig);
  const int saved = errno;
  (void)!write(signal_pipe[1], &c, 1);  // a full pipe drops it: the loop wakes up anyway
  errno = saved;
}

}  // namespace

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
  if (sigaction(SIGPIPE, &ignore, nullptr) != 0) {
    Failed("sigaction(PIPE)");
    return false;
  }
  return true;
}

int SignalPipe() { return signal_pipe[0]; }

void CloseSignalPipe() {
  for (int& fd : signal_pipe) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

bool IsStopSignal(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP; }

int PendingStopSignal() {
  unsigned char sig;
  int stop = 0;
  while (read(signal_pipe[0], &sig, 1) == 1) {
    if (IsStopSignal(sig)) stop = sig;
  }
  return stop;
}

int WaitForStopSignal(std::chrono::steady_clock::duration wait) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point end = Clock::now() + wait;
  while (true) {
    if (const int sig = PendingStopSignal(); sig != 0) return sig;
    const Clock::time_point now = Clock::now();
    if (now >= end) return 0;
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(end - now).count();
    pollfd fd{signal_pipe[0], POLLIN, 0};
    // Long waits in slices: a failing poll must not turn the back-off into a busy loop or a hang.
    if (poll(&fd, 1, static_cast<int>(std::min<int64_t>(ms, 1000))) < 0 && errno != EINTR) {
      Failed("poll during the back-off");
      usleep(static_cast<useconds_t>(std::min<int64_t>(ms, 1000)) * 1000);
    }
  }
}

}  // namespace kiln::launch
