#include "tools/launch_generation.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tools/launch_keeper.h"
#include "tools/launch_messages.h"
#include "tools/launch_output.h"
#include "tools/launch_reaper.h"
#include "tools/launch_signals.h"

namespace kiln::launch {
namespace {

using Clock = std::chrono::steady_clock;

struct Rank {
  pid_t pid = 0;  // set once the keeper has started it
  Stream streams[2];
};

// Launch's loop over one generation: the ranks' output, the keeper's reports, launch's signals.
class Supervisor {
 public:
  Supervisor(std::vector<Rank>& ranks, Keeper& keeper, const GenerationPlan& plan)
      : ranks_(ranks), keeper_(keeper), plan_(plan) {}
  Outcome Run();

 private:
  void Fail() {
    outcome_.interrupted = true;
    if (!result_) result_ = 1;
  }
  void StopAll(int sig);
  bool ShouldFinish(Clock::time_point now) const;
  int PollTimeoutMs(Clock::time_point now) const;
  bool PollOnce(Clock::time_point now);
  void ReadSignals();
  void ReadReports();
  void OnReport(const KeeperReport& r);
  void OnStartFailed(int rank);
  void OnRankExited(int rank, int status);
  void OnKeeperGone();

  std::vector<Rank>& ranks_;
  Keeper& keeper_;
  const GenerationPlan& plan_;
  Outcome outcome_;
  std::optional<int> result_;
  std::optional<Clock::time_point> kill_at_;      // then everything left is SIGKILLed
  std::optional<Clock::time_point> drain_until_;  // set once no rank runs: output waited for
  int started_ = 0, running_ = 0;
  bool starting_ = true, keeper_gone_ = false;
  std::string report_bytes_;
};

Outcome Supervisor::Run() {
  while (!keeper_gone_) {
    const Clock::time_point now = Clock::now();
    if (!starting_ && running_ == 0 && !drain_until_) drain_until_ = kill_at_.value_or(now + plan_.grace);
    if (!keeper_.finished() && ShouldFinish(now)) keeper_.Finish();
    if (!PollOnce(now)) {
      // Without poll the output cannot be forwarded: end the generation and wait for the keeper.
      Fail();
      keeper_.Finish();
      fcntl(keeper_.reports(), F_SETFL, 0);
      while (!keeper_gone_) ReadReports();
    }
    ReadSignals();
    ReadReports();
  }
  for (size_t r = 0; r < ranks_.size(); ++r) {
    for (Stream& s : ranks_[r].streams) CloseStream(static_cast<int>(r), s);
  }
  outcome_.code = result_.value_or(0);
  return outcome_;
}

void Supervisor::StopAll(int sig) {
  keeper_.Forward(sig);
  if (!kill_at_) kill_at_ = Clock::now() + plan_.grace;
}

// The generation is over when no rank runs and their output has ended (or had its grace
// period), or when the grace period after stopping them has passed.
bool Supervisor::ShouldFinish(Clock::time_point now) const {
  if (kill_at_ && now >= *kill_at_) return true;
  if (starting_ || running_ > 0) return false;
  const bool output_open = std::any_of(ranks_.begin(), ranks_.end(),
                                       [](const Rank& r) { return r.streams[0].fd >= 0 || r.streams[1].fd >= 0; });
  return !output_open || now >= *drain_until_;
}

int Supervisor::PollTimeoutMs(Clock::time_point now) const {
  Clock::duration wait = std::chrono::milliseconds(200);
  if (!keeper_.finished()) {
    if (kill_at_) wait = std::min(wait, *kill_at_ - now);
    if (drain_until_) wait = std::min(wait, *drain_until_ - now);
  }
  return static_cast<int>(std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(wait).count()));
}

// Waits for something to read and forwards the output that came; false (reported) when poll fails.
bool Supervisor::PollOnce(Clock::time_point now) {
  std::vector<pollfd> fds{{SignalPipe(), POLLIN, 0}, {keeper_.reports(), POLLIN, 0}};
  std::vector<std::pair<int, Stream*>> owners;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    for (Stream& s : ranks_[r].streams) {
      if (s.fd < 0) continue;
      fds.push_back({s.fd, POLLIN, 0});
      owners.push_back({static_cast<int>(r), &s});
    }
  }
  if (poll(fds.data(), fds.size(), PollTimeoutMs(now)) < 0 && errno != EINTR) {
    Failed("poll");
    return false;
  }
  for (size_t i = 2; i < fds.size(); ++i) {
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL))
      ReadStream(owners[i - 2].first, *owners[i - 2].second);
  }
  return true;
}

void Supervisor::ReadSignals() {
  unsigned char sig;
  ssize_t got;
  while ((got = read(SignalPipe(), &sig, 1)) == 1) {
    if (!IsStopSignal(sig)) continue;  // SIGCHLD only wakes launch up
    std::fprintf(stderr, "launch: got %s; forwarding it to every rank\n", strsignal(sig));
    outcome_.interrupted = true;
    if (!result_) result_ = 128 + sig;
    StopAll(sig);
  }
  if (got < 0 && errno != EAGAIN && errno != EINTR) Failed("read of the signal pipe");
}

void Supervisor::ReadReports() {
  if (keeper_gone_) return;
  char buf[4096];
  const ssize_t n = read(keeper_.reports(), buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    if (n < 0) Failed("read of the keeper's reports");
    OnKeeperGone();
    return;
  }
  report_bytes_.append(buf, n);
  size_t done = 0;
  for (; report_bytes_.size() - done >= sizeof(KeeperReport); done += sizeof(KeeperReport)) {
    KeeperReport r;
    std::memcpy(&r, report_bytes_.data() + done, sizeof(r));
    OnReport(r);
  }
  report_bytes_.erase(0, done);
}

void Supervisor::OnReport(const KeeperReport& r) {
  if (r.rank < 0 || static_cast<size_t>(r.rank) >= ranks_.size()) return;
  if (r.kind == KeeperReport::kRankStarted) {
    ranks_[r.rank].pid = r.pid;
    ++running_;
    if (++started_ == static_cast<int>(ranks_.size())) starting_ = false;
  } else if (r.kind == KeeperReport::kStartFailed) {
    OnStartFailed(r.rank);
  } else if (r.kind == KeeperReport::kRankExited) {
    OnRankExited(r.rank, r.status);
  }
}

void Supervisor::OnStartFailed(int rank) {
  starting_ = false;
  for (size_t r = rank; r < ranks_.size(); ++r) {
    if (ranks_[r].pid > 0) continue;  // started, but a call after fork failed
    for (Stream& s : ranks_[r].streams) CloseStream(static_cast<int>(r), s);
  }
  std::fprintf(stderr, "launch: stopping the %d rank(s) already started\n", started_);
  Fail();
  StopAll(SIGTERM);
}

void Supervisor::OnRankExited(int rank, int status) {
  --running_;
  // Ranks SIGKILLed at the generation's end do not count as failures.
  if (keeper_.finished() || (WIFEXITED(status) && WEXITSTATUS(status) == 0) || result_) return;
  result_ = ExitCode(status);
  outcome_.failed_rank = rank;
  outcome_.failed_status = status;
  std::fprintf(stderr, "launch: rank %d (pid %d) %s%s; stopping the other ranks\n", rank, ranks_[rank].pid,
               Describe(status).c_str(), plan_.label.c_str());
  StopAll(SIGTERM);
}

// The keeper closed its reports: it has ended. Before launch asked, that is a failure, and
// what it leaves is now launch's to kill (launch is a child subreaper too).
void Supervisor::OnKeeperGone() {
  keeper_gone_ = true;
  int status = 0;
  while (waitpid(keeper_.pid(), &status, 0) < 0 && errno == EINTR) {
  }
  if (!keeper_.finished() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "launch: the keeper of generation %d (pid %d) %s; stopping the ranks\n", plan_.generation,
                 keeper_.pid(), Describe(status).c_str());
    Fail();
    keeper_.Finish();
  }
  KillDescendants(nullptr);
}

// Makes rank `r`'s stdout and stderr pipes: the read ends in `rank`, the write ends in `plan`
// for the keeper. False (reported) when pipe2 fails.
bool MakeRankPipes(int r, Rank& rank, KeeperPlan& plan) {
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
  // Non-blocking, so that the last read before closing cannot hang on a pipe that a process
  // out of launch's reach still holds open.
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  rank.streams[0] = {out[0], 1, ""};
  rank.streams[1] = {err[0], 2, ""};
  plan.pipes.push_back({out[1], err[1]});
  plan.launch_only.insert(plan.launch_only.end(), {out[0], err[0]});
  return true;
}

void CloseAll(std::vector<Rank>& ranks, const KeeperPlan& plan) {
  for (Rank& r : ranks) {
    for (Stream& s : r.streams) {
      if (s.fd >= 0) close(s.fd);
      s.fd = -1;
    }
  }
  for (const RankPipes& p : plan.pipes) {
    close(p.out);
    close(p.err);
  }
}

}  // namespace

Outcome RunGeneration(const GenerationPlan& plan) {
  std::vector<Rank> ranks(plan.nproc);
  KeeperPlan keeper_plan{plan.args, {}, {}, plan.rendezvous_dir, plan.generation};
  const Outcome failed{1, std::nullopt, 0, true};
  for (int r = 0; r < plan.nproc; ++r) {
    if (!MakeRankPipes(r, ranks[r], keeper_plan)) {
      CloseAll(ranks, keeper_plan);
      return failed;
    }
  }
  std::optional<Keeper> keeper = Keeper::Start(keeper_plan);  // closes the write ends here
  if (!keeper) {
    keeper_plan.pipes.clear();
    CloseAll(ranks, keeper_plan);
    return failed;
  }
  const Outcome outcome = Supervisor(ranks, *keeper, plan).Run();
  close(keeper->reports());
  return outcome;
}

}  // namespace kiln::launch
