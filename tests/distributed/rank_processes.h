// Starts ranks of a multi-process test as child processes of the test (fork + exec of a
// worker binary, KILN_* set as the launcher sets them), collects their output and exit
// status, and never leaves one behind: a rank still running at the deadline is killed.
#ifndef KILN_TESTS_DISTRIBUTED_RANK_PROCESSES_H_
#define KILN_TESTS_DISTRIBUTED_RANK_PROCESSES_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kiln::testing {

struct RankResult {
  int exit_code = -1;  // -1 if killed by a signal
  int signal = 0;
  std::string output;  // stdout and stderr
  double seconds = 0;  // from start to exit
};

class RankProcesses {
 public:
  // `env` is added to every rank's environment (after the KILN_* of its place).
  RankProcesses(std::string binary, int world_size, std::string rendezvous, std::map<std::string, std::string> env = {})
      : binary_(std::move(binary)), world_size_(world_size), rendezvous_(std::move(rendezvous)), env_(std::move(env)) {
    static int serial = 0;
    run_id_ = absl::StrCat("test-", getpid(), "-", serial++);
  }
  ~RankProcesses() {
    for (auto& [rank, p] : procs_) {
      if (!p.done) {
        kill(p.pid, SIGKILL);
        waitpid(p.pid, nullptr, 0);
      }
    }
  }

  // Starts rank `rank` running `args` (after the binary).
  void Start(int rank, const std::vector<std::string>& args) {
    Proc& p = procs_[rank];
    p.output = absl::StrCat(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp", "/", run_id_, "-rank",
                            rank, ".out");
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string(*e).rfind("KILN_", 0) != 0) env.push_back(*e);
    }
    for (const auto& [k, v] : std::map<std::string, std::string>{{"KILN_RANK", absl::StrCat(rank)},
                                                                 {"KILN_WORLD_SIZE", absl::StrCat(world_size_)},
                                                                 {"KILN_LOCAL_RANK", absl::StrCat(rank)},
                                                                 {"KILN_LOCAL_WORLD_SIZE", absl::StrCat(world_size_)},
                                                                 {"KILN_RENDEZVOUS", rendezvous_},
                                                                 {"KILN_RUN_ID", run_id_},
                                                                 {"KILN_HOST", "127.0.0.1"}}) {
      env.push_back(k + "=" + v);
    }
    for (const auto& [k, v] : env_) env.push_back(k + "=" + v);
    std::vector<std::string> argv{binary_};
    argv.insert(argv.end(), args.begin(), args.end());
    p.start = std::chrono::steady_clock::now();
    p.pid = fork();
    if (p.pid == 0) {
      const int fd = open(p.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> a, e;
      for (auto& s : argv) a.push_back(s.data());
      for (auto& s : env) e.push_back(s.data());
      a.push_back(nullptr);
      e.push_back(nullptr);
      execve(a[0], a.data(), e.data());
      _exit(127);
    }
  }
  void StartAll(const std::vector<std::string>& args) {
    for (int r = 0; r < world_size_; ++r) Start(r, args);
  }

  pid_t pid(int rank) { return procs_[rank].pid; }
  std::string Output(int rank) {
    std::ifstream f(procs_[rank].output);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  // Waits until rank's output contains `text` (true) or the deadline passes (false).
  bool WaitForOutput(int rank, const std::string& text, std::chrono::milliseconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
      if (Output(rank).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // Waits for `rank` to exit, killing it at the deadline (then exit_code is -1, signal 9).
  RankResult Wait(int rank, std::chrono::milliseconds within) {
    Proc& p = procs_[rank];
    RankResult r;
    const auto deadline = std::chrono::steady_clock::now() + within;
    int status = 0;
    while (!p.done) {
      const pid_t got = waitpid(p.pid, &status, WNOHANG);
      if (got == p.pid) {
        p.done = true;
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill(p.pid, SIGKILL);
        waitpid(p.pid, &status, 0);
        p.done = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.start).count();
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    r.output = Output(rank);
    return r;
  }
  std::vector<RankResult> WaitAll(std::chrono::milliseconds within) {
    std::vector<RankResult> out;
    for (int r = 0; r < world_size_; ++r) out.push_back(Wait(r, within));
    return out;
  }
  const std::string& run_id() const { return run_id_; }

 private:
  struct Proc {
    pid_t pid = -1;
    std::string output;
    std::chrono::steady_clock::time_point start;
    bool done = false;
  };
  std::string binary_;
  int world_size_;
  std::string rendezvous_;
  std::map<std::string, std::string> env_;
  std::string run_id_;
  std::map<int, Proc> procs_;
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_DISTRIBUTED_RANK_PROCESSES_H_
