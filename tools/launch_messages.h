// How tools/launch reports what went wrong: a failed system call with errno's reason, and how a
// process ended.
#ifndef KILN_TOOLS_LAUNCH_MESSAGES_H_
#define KILN_TOOLS_LAUNCH_MESSAGES_H_

#include <string>

namespace kiln::launch {

// Prints "launch: CALL failed: REASON" for the system call that just failed (errno).
void Failed(const std::string& call);

// How a process ended, from its wait status: "exited with status 1", "was killed by signal 9
// (Killed)".
std::string Describe(int status);

// The exit status that passes a wait status on: its own, or 128 + the signal.
int ExitCode(int status);

}  // namespace kiln::launch

#endif  // KILN_TOOLS_LAUNCH_MESSAGES_H_
