// The rendezvous folder tools/launch makes when none is given: kiln-launch-<launch's pid>-XXXXXX
// in TMPDIR (or /tmp), locked (flock) for as long as launch or its keeper lives, removed at the
// end. A launch that could not remove its own (SIGKILL between generations, when no keeper
// runs) leaves it to the next launch in the same TMPDIR, which removes every such folder whose
// pid is dead and whose lock is free.
#ifndef KILN_TOOLS_LAUNCH_RENDEZVOUS_DIR_H_
#define KILN_TOOLS_LAUNCH_RENDEZVOUS_DIR_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace kiln::launch {

struct RendezvousDir {
  std::string path;
  int lock_fd = -1;  // the folder itself, open (close-on-exec) and locked
};

// The pid in a name this file gives its folders (exactly "kiln-launch-PID-XXXXXX", PID > 1 as
// written by a program, XXXXXX six letters or digits as mkdtemp makes them); nullopt for any
// other name.
std::optional<pid_t> RendezvousDirOwner(std::string_view name);

// Removes the folders in `parent` that launches now gone left behind: named as above, a
// folder (not a link) of this user, its pid dead and its lock free. Says what it removed.
void ReclaimRendezvousDirs(const std::string& parent);

// Makes and locks a fresh folder in `parent`; nullopt (reported) on failure.
std::optional<RendezvousDir> MakeRendezvousDir(const std::string& parent);

// Removes `path` and all it holds, never following a link; false (reported) on failure.
bool RemoveTree(const std::string& path);

}  // namespace kiln::launch

#endif  // KILN_TOOLS_LAUNCH_RENDEZVOUS_DIR_H_
