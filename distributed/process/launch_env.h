// Where this process stands in a multi-process run: rank, world size, local rank and the
// rendezvous address, read from the environment that a launcher set. kiln's own launcher
// (tools/launch) sets KILN_*; `srun` (Slurm) and `mpirun` (Open MPI) set their own variables,
// which are understood too, so cluster users launch with the tools they already have.
#ifndef KILN_DISTRIBUTED_PROCESS_LAUNCH_ENV_H_
#define KILN_DISTRIBUTED_PROCESS_LAUNCH_ENV_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace kiln::distributed {

// The most ranks in a run and on one machine; ReadLaunchEnv refuses more (launch_env.cc says why).
inline constexpr int kMaxWorldSize = 65536;
inline constexpr int kMaxLocalWorldSize = 8192;
// The longest values ReadLaunchEnv accepts, in bytes.
inline constexpr size_t kMaxRendezvousLength = 4096;
inline constexpr size_t kMaxHostLength = 255;
inline constexpr size_t kMaxRunIdLength = 256;
inline constexpr size_t kMinRunTokenLength = 16;
inline constexpr size_t kMaxRunTokenLength = 1024;
// The highest run generation (restart count) ReadLaunchEnv accepts, and the most restarts
// tools/launch --max_restarts takes (launch_env.cc says why).
inline constexpr int kMaxRestartCount = 1000000;
// The longest run id of a generation: KILN_RUN_ID's longest plus ".restart-1000000".
inline constexpr size_t kMaxGenerationRunIdLength = kMaxRunIdLength + 16;

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // among the ranks on this machine
  int local_world_size = 1;  // ranks on this machine
  std::string rendezvous;    // file:///shared/dir or redis://host:port
  std::string run_id;        // keys of this run generation in the store; empty: none
  std::string host;          // address this rank listens on; empty: this machine's hostname
  std::string run_token;     // the secret peers prove; empty: the process group derives one
  std::string source;        // "kiln", "openmpi" or "slurm": whose variables gave the ranks
  // The run generation: 0 at the first start, then 1, 2, ... each time the launcher (or Slurm's
  // requeue) starts every rank again. A program resumes from its newest checkpoint when it is
  // above 0.
  int restart_count = 0;
};

// Reads a variable; nullptr when unset.
using GetEnv = std::function<const char*(const char* name)>;

// Precedence for rank and world size: KILN_RANK/KILN_WORLD_SIZE, then Open MPI's
// OMPI_COMM_WORLD_RANK/SIZE (mpirun may run inside a Slurm allocation, whose SLURM_* then
// describe the allocation, not the ranks), then Slurm's SLURM_PROCID/SLURM_NTASKS. The local
// rank comes from the same family (KILN_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK,
// SLURM_LOCALID; 0 if unset) and so does the local world size (KILN_LOCAL_WORLD_SIZE,
// OMPI_COMM_WORLD_LOCAL_SIZE; 1 if unset). Slurm's is SLURM_NTASKS_PER_NODE, else
// SLURM_STEP_TASKS_PER_NODE (which srun always sets), else 1, and may be a list of per-node
// counts as Slurm writes them: "4", "4(x2)" (4 on each of 2 nodes), "2(x3),1" (2 on each of
// the first 3 nodes, 1 on the 4th). A list whose counts differ is looked up at this node's
// index, SLURM_NODEID. The rendezvous address is always KILN_RENDEZVOUS; the run id
// KILN_RUN_ID, else SLURM_JOB_ID.SLURM_STEP_ID; the listening address KILN_HOST; the run token
// KILN_RUN_TOKEN (tools/launch sets one for each run). The run generation is
// KILN_RESTART_COUNT (tools/launch sets it), else SLURM_RESTART_COUNT (a requeued Slurm job),
// else 0. Above 0, the run id gets ".restart-G" added (or is "restart-G" when there is none):
// ranks of one generation meet under their own keys, so a restarted rank never reads the
// address a rank of an earlier generation left in a shared store, and without KILN_RUN_TOKEN
// the token derived from the run id differs too.
//
// Integers are exact: decimal digits with an optional '-', no spaces or '+'. Limits:
// world size 1..kMaxWorldSize, local world size 1..min(world size, kMaxLocalWorldSize),
// restart count 0..kMaxRestartCount; KILN_RENDEZVOUS, KILN_HOST and KILN_RUN_ID at most their
// kMax*Length bytes and without control characters; KILN_RUN_TOKEN
// kMinRunTokenLength..kMaxRunTokenLength bytes of printable ASCII without spaces.
//
// nullopt: none of the families is set (a single-process run). InvalidArgument, naming the
// variable: a family set in part, a value that is not an integer, a world size out of range,
// a rank, local rank or restart count out of range, a missing or malformed KILN_RENDEZVOUS,
// a value too long or with a control character, a malformed run token. Values are quoted escaped and cut
// short; the run token never appears in a message.
absl::StatusOr<std::optional<LaunchEnv>> ReadLaunchEnv(const GetEnv& getenv);
absl::StatusOr<std::optional<LaunchEnv>> ReadLaunchEnv();  // the process's environment

// Checks the form of a rendezvous address (file:///absolute/dir or redis://host[:port]), at
// most kMaxRendezvousLength bytes without control characters.
absl::Status CheckRendezvousAddress(const std::string& address);

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_PROCESS_LAUNCH_ENV_H_
