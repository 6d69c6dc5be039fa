// What every training program does before its first step, written once: read the launcher's
// environment, check the checkpoint path, parse and validate --devices (each process taking
// its own GPUs, the logical CPU devices made to exist), join the other processes, and agree
// with them on the run's settings. Programs exit 2 on a usage error (UsageError) and 1 when
// the run itself fails (RunFailure).
#ifndef KILN_EXAMPLES_RUN_SETUP_H_
#define KILN_EXAMPLES_RUN_SETUP_H_

#include <functional>
#include <string>
#include <vector>

#include "backends/dispatch/dispatch_device.h"
#include "distributed/group_options.h"
#include "distributed/process/settings_agreement.h"

namespace kiln {

struct UsageError {  // exit 2
  std::string message;
};
struct RunFailure {  // exit 1
  std::string message;
};

struct RunFlags {
  std::string devices;
  int threads = 0;  // per device; 0: the cores shared fairly
  double collective_timeout_s = 60;
  std::string checkpoint;           // "": none
  std::string flight_recorder_dir;  // "": $KILN_FLIGHT_RECORDER_DIR (distributed/flight_recorder.h)
};

struct Run {
  std::vector<DispatchDevice> devices;  // this process's, validated
  distributed::GroupOptions group_options;
  int rank = 0, processes = 1;
};

// Throws UsageError or RunFailure. `settings` (those that change the math) are compared with
// every other rank's.
Run SetUpRun(const RunFlags& flags, distributed::Settings settings);

// A training program's main: the command line parsed strictly into the flags (--help prints
// the usage with `summary`), then `run`. A UsageError or kiln::Error exits 2; a RunFailure,
// std::bad_alloc or any other exception 1, each with its message after "`program`: " on stderr.
int RunMain(int argc, char** argv, const char* program, const char* summary, const std::function<int()>& run);

}  // namespace kiln

#endif  // KILN_EXAMPLES_RUN_SETUP_H_
