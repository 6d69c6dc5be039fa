// One run generation as tools/launch sees it: the ranks started through a keeper
// (launch_keeper.h), their output forwarded, signals to launch passed on, a failed rank
// stopping the others (SIGTERM, then after the grace period SIGKILL to everything the
// generation left), and its end only once nothing of it is left.
#ifndef KILN_TOOLS_LAUNCH_GENERATION_H_
#define KILN_TOOLS_LAUNCH_GENERATION_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace kiln::launch {

// How one generation ended.
struct Outcome {
  int code = 0;  // launch's exit status, were it to end here
  // The rank whose failure ended the generation, and its wait status; unset when the ranks
  // all exited 0, or when a signal to launch or a failure of launch came first.
  std::optional<int> failed_rank;
  int failed_status = 0;
  bool interrupted = false;  // a signal to launch or a failure of launch: no restart
};

struct GenerationPlan {
  int nproc = 0;
  std::vector<char*> args;  // the program and its arguments, null-terminated
  std::chrono::steady_clock::duration grace{};
  int generation = 0;
  std::string label;           // added to the failure message: "" or " in generation G"
  std::string rendezvous_dir;  // launch's own folder ("" when given), for the keeper
};

// Starts the generation's ranks and supervises them until they have all ended and nothing of
// the generation is left.
Outcome RunGeneration(const GenerationPlan& plan);

}  // namespace kiln::launch

#endif  // KILN_TOOLS_LAUNCH_GENERATION_H_
