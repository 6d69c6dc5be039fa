// The signals tools/launch answers (SIGINT, SIGTERM, SIGHUP, and SIGCHLD to wake it up), turned
// into bytes on a pipe that its poll loops read (the self-pipe trick).
#ifndef KILN_TOOLS_LAUNCH_SIGNALS_H_
#define KILN_TOOLS_LAUNCH_SIGNALS_H_

#include <chrono>

namespace kiln::launch {

// Makes the pipe and installs the handlers; SIGPIPE is ignored (a closed stdout must not kill
// launch). False (reported) when a call fails.
bool InstallSignalHandlers();

// The pipe's read end (non-blocking): one byte per signal caught, its number.
int SignalPipe();

// Closes the pipe in a child that must not report to launch's loop (the keeper).
void CloseSignalPipe();

// Whether `sig` asks launch to stop: SIGINT, SIGTERM or SIGHUP.
bool IsStopSignal(int sig);

// A stop signal already caught and not yet read (0: none); the other bytes are dropped.
int PendingStopSignal();

// Waits up to `wait` for a stop signal: the signal, or 0 when the time passed without one.
int WaitForStopSignal(std::chrono::steady_clock::duration wait);

}  // namespace kiln::launch

#endif  // KILN_TOOLS_LAUNCH_SIGNALS_H_
