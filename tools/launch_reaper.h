// The processes below a process, found by walking /proc, and the killing of all of them: how
// tools/launch and its keeper make sure that no process of a generation outlives it. The caller
// must be a child subreaper (prctl PR_SET_CHILD_SUBREAPER): then every process below it that
// loses its parent becomes its child, so none can leave the tree, and none is missed for having
// left its process group or session (setpgid, setsid).
#ifndef KILN_TOOLS_LAUNCH_REAPER_H_
#define KILN_TOOLS_LAUNCH_REAPER_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace kiln::launch {

// The fields of /proc/PID/stat that the walk needs.
struct ProcStat {
  pid_t pid = 0;
  char state = 0;  // 'Z': a zombie, dead and waiting for its parent
  pid_t ppid = 0;
};

// Parses "PID (COMM) STATE PPID ..."; COMM may hold anything, ')' and spaces too (a process
// names itself), so it ends at the last ')'. nullopt on anything else.
std::optional<ProcStat> ParseProcStat(std::string_view text);

// The processes below `ancestor` (its children, theirs, and so on) as /proc shows them now.
std::vector<ProcStat> Descendants(pid_t ancestor);

// Called with each child reaped, and its wait status.
using OnReaped = std::function<void(pid_t pid, int status)>;

// Reaps this process's children that have ended, without waiting; false once it has none.
bool ReapChildren(const OnReaped& on_reaped);

// SIGKILLs every process below this one and reaps the children, again until none is left (a
// process may fork while the others are being killed); a process that refuses the signal (one
// that changed its user) is reported and left. Says which ones still run after 10 s (a process
// in uninterruptible sleep ends only when its I/O does), and waits on.
void KillDescendants(const OnReaped& on_reaped);

}  // namespace kiln::launch

#endif  // KILN_TOOLS_LAUNCH_REAPER_H_
