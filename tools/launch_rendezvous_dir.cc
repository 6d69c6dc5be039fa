#include "tools/launch_rendezvous_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "tools/launch_messages.h"
#include "tools/launch_options.h"

namespace kiln::launch {
namespace {

constexpr absl::string_view kPrefix = "kiln-launch-";
constexpr size_t kSuffixLength = 6;  // mkdtemp's XXXXXX

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return remove(path); }

// Whether the process `pid` may still be running: kill(pid, 0) finds it (EPERM: it is another
// user's, but it is there).
bool Alive(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// Removes parent/name if it is a stale folder of launch pid `owner`: a folder of this user
// whose lock is free. The lock is held while removing, so a concurrent launch skips it.
void ReclaimIfStale(int parent_fd, const std::string& parent, const char* name, pid_t owner) {
  const int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;  // a link, a file, or gone
  struct stat st;
  if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && flock(fd, LOCK_EX | LOCK_NB) == 0) {
    const std::string path = absl::StrCat(parent, "/", name);
    if (RemoveTree(path)) {
      std::fprintf(stderr, "launch: removed %s, the rendezvous folder of launch pid %d, which is gone\n", path.c_str(),
                   static_cast<int>(owner));
    }
  }
  close(fd);
}

}  // namespace

std::optional<pid_t> RendezvousDirOwner(std::string_view name) {
  if (name.substr(0, kPrefix.size()) != std::string_view(kPrefix.data(), kPrefix.size())) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  const size_t dash = name.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 10 || name[0] == '0') return std::nullopt;
  const std::string_view digits = name.substr(0, dash), suffix = name.substr(dash + 1);
  for (const char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  if (suffix.size() != kSuffixLength) return std::nullopt;
  for (const char c : suffix) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) return std::nullopt;
  }
  int64_t pid = 0;  // ten digits fit
  for (const char c : digits) pid = pid * 10 + (c - '0');
  if (pid <= 1 || pid > std::numeric_limits<pid_t>::max()) return std::nullopt;
  return static_cast<pid_t>(pid);
}

void ReclaimRendezvousDirs(const std::string& parent) {
  DIR* dir = opendir(parent.c_str());
  if (dir == nullptr) return;  // making the new folder will fail and say why
  while (const dirent* e = readdir(dir)) {
    const std::optional<pid_t> owner = RendezvousDirOwner(e->d_name);
    if (!owner || *owner == getpid() || Alive(*owner)) continue;
    ReclaimIfStale(dirfd(dir), parent, e->d_name, *owner);
  }
  closedir(dir);
}

std::optional<RendezvousDir> MakeRendezvousDir(const std::string& parent) {
  const std::string pattern = absl::StrCat(parent, "/", kPrefix, getpid(), "-XXXXXX");
  std::string path = pattern;  // mkdtemp fills in the X's even when it fails
  if (mkdtemp(path.data()) == nullptr) {
    Failed(absl::StrCat("mkdtemp for the rendezvous directory ", Quote(pattern)));
    return std::nullopt;
  }
  RendezvousDir dir{path, open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
  if (dir.lock_fd < 0 || flock(dir.lock_fd, LOCK_EX) != 0) {
    Failed(absl::StrCat("locking the rendezvous directory ", path));
    if (dir.lock_fd >= 0) close(dir.lock_fd);
    rmdir(path.c_str());
    return std::nullopt;
  }
  return dir;
}

bool RemoveTree(const std::string& path) {
  if (nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS) == 0) return true;
  Failed(absl::StrCat("removing the rendezvous directory ", path));
  return false;
}

}  // namespace kiln::launch
