#include "tools/launch_reaper.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/launch_messages.h"

namespace kiln::launch {
namespace {

// A pid as /proc writes it: 1 to 10 digits, no sign, no leading zero.
std::optional<pid_t> ParsePid(std::string_view digits) {
  if (digits.empty() || digits.size() > 10 || (digits[0] == '0' && digits.size() > 1)) return std::nullopt;
  for (const char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  int64_t value = 0;  // ten digits fit
  for (const char c : digits) value = value * 10 + (c - '0');
  if (value > std::numeric_limits<pid_t>::max()) return std::nullopt;
  return static_cast<pid_t>(value);
}

std::optional<ProcStat> ReadProcStat(const std::string& pid) {
  const int fd = open(absl::StrCat("/proc/", pid, "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;  // it has gone since the folder was listed
  char buf[1024];                   // COMM is at most 16 bytes: the fields needed fit
  ssize_t n;
  do {
    n = read(fd, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return std::nullopt;
  return ParseProcStat(std::string_view(buf, n));
}

// Every process /proc lists now.
std::vector<ProcStat> AllProcesses() {
  std::vector<ProcStat> all;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) {
    Failed("opendir(/proc)");
    return all;
  }
  while (const dirent* e = readdir(proc)) {
    if (!ParsePid(e->d_name)) continue;
    if (std::optional<ProcStat> s = ReadProcStat(e->d_name)) all.push_back(*s);
  }
  closedir(proc);
  return all;
}

// SIGKILLs `pid` if its parent is still in `tree`: a pidfd pins the process before that check,
// so a process that died and whose pid was reused meanwhile is not signalled. False (reported)
// when the signal is refused.
bool KillIfBelow(pid_t pid, const std::unordered_set<pid_t>& tree) {
  int result = 0;
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) {
    const std::optional<ProcStat> now = ReadProcStat(absl::StrCat(pid));
    if (now && tree.count(now->ppid))
      result = static_cast<int>(syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0));
    const int error = errno;
    close(fd);
    errno = error;
  } else if (errno != ESRCH) {
    result = kill(pid, SIGKILL);  // a kernel before 5.3 has no pidfd
  }
  if (result == 0 || errno == ESRCH) return true;
  Failed(absl::StrCat("kill(", pid, ", SIGKILL) of a process left by a rank"));
  return false;
}

}  // namespace

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  const size_t open = text.find(" (");
  const size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open + 2) return std::nullopt;
  ProcStat s;
  const std::optional<pid_t> pid = ParsePid(text.substr(0, open));
  if (!pid || *pid == 0) return std::nullopt;
  s.pid = *pid;
  // ") S PPID ..."
  std::string_view rest = text.substr(close + 1);
  if (rest.size() < 4 || rest[0] != ' ' || rest[2] != ' ' ||
      !absl::ascii_isalpha(static_cast<unsigned char>(rest[1]))) {
    return std::nullopt;
  }
  s.state = rest[1];
  rest.remove_prefix(3);
  const std::optional<pid_t> ppid = ParsePid(rest.substr(0, rest.find(' ')));
  if (!ppid) return std::nullopt;
  s.ppid = *ppid;
  return s;
}

std::vector<ProcStat> Descendants(pid_t ancestor) {
  const std::vector<ProcStat> all = AllProcesses();
  std::unordered_multimap<pid_t, size_t> children;  // parent -> index in `all`
  for (size_t i = 0; i < all.size(); ++i) children.emplace(all[i].ppid, i);
  std::vector<ProcStat> below;
  std::vector<pid_t> parents{ancestor};
  std::unordered_set<pid_t> seen{ancestor};  // a cycle cannot happen, but /proc is read racily
  while (!parents.empty()) {
    const pid_t parent = parents.back();
    parents.pop_back();
    const auto [first, last] = children.equal_range(parent);
    for (auto it = first; it != last; ++it) {
      const ProcStat& child = all[it->second];
      if (!seen.insert(child.pid).second) continue;
      below.push_back(child);
      parents.push_back(child.pid);
    }
  }
  return below;
}

bool ReapChildren(const OnReaped& on_reaped) {
  while (true) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      if (on_reaped) on_reaped(pid, status);
      continue;
    }
    if (pid == 0) return true;
    if (errno == EINTR) continue;
    if (errno != ECHILD) Failed("waitpid");
    return false;
  }
}

void KillDescendants(const OnReaped& on_reaped) {
  using Clock = std::chrono::steady_clock;
  const pid_t self = getpid();
  const Clock::time_point warn_at = Clock::now() + std::chrono::seconds(10);
  bool warned = false;
  std::unordered_set<pid_t> refused;
  useconds_t pause_us = 1000;
  while (ReapChildren(on_reaped)) {
    const std::vector<ProcStat> below = Descendants(self);
    std::unordered_set<pid_t> tree{self};
    for (const ProcStat& p : below) tree.insert(p.pid);
    std::vector<pid_t> running;
    bool own_zombie = false;
    for (const ProcStat& p : below) {
      own_zombie |= p.state == 'Z' && p.ppid == self;
      if (p.state == 'Z' || refused.count(p.pid)) continue;
      if (KillIfBelow(p.pid, tree)) {
        running.push_back(p.pid);
      } else {
        refused.insert(p.pid);
      }
    }
    // What is left refused the signal, or is a zombie whose parent did.
    if (running.empty() && !own_zombie) return;
    if (!warned && !running.empty() && Clock::now() >= warn_at) {
      warned = true;
      std::fprintf(stderr, "launch: %zu process(es) still run 10 s after SIGKILL (pid %s); waiting for them\n",
                   running.size(), absl::StrJoin(running, ", ").c_str());
    }
    usleep(pause_us);
    pause_us = std::min<useconds_t>(pause_us * 2, 50000);
  }
}

}  // namespace kiln::launch
