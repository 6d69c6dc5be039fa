// tools/launch's command line: the flags (launch.cc's header says what each does), checked
// strictly; a usage error is a message and exit status 2.
#ifndef KILN_TOOLS_LAUNCH_OPTIONS_H_
#define KILN_TOOLS_LAUNCH_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace kiln::launch {

struct Options {
  int nproc = 0;                     // ranks, 1..1024
  std::string rendezvous;            // empty: a fresh directory that launch makes
  double grace = 5;                  // seconds from SIGTERM to SIGKILL when stopping the ranks
  int max_restarts = 0;              // 0: a failed rank ends the run
  double restart_backoff = 1;        // seconds before the first restart, doubling after each
  std::vector<std::string> command;  // the program and its arguments
};

// The flags, then the program and its arguments; exits 2 (Usage) on anything else.
Options ParseOptions(int argc, char** argv);

// Prints `why` and the usage line, and exits 2.
[[noreturn]] void Usage(const std::string& why);

// An argument as a message shows it: escaped, and cut so that a huge one gives a short line.
std::string Quote(absl::string_view value);

}  // namespace kiln::launch

#endif  // KILN_TOOLS_LAUNCH_OPTIONS_H_
