// NcclWatchdog: a deadline for NCCL collectives. NCCL's kernels wait for their peers without
// limit, so a peer that dies mid-collective (another process, or a rank of this one whose call
// failed after the others queued theirs) would leave the GPU, and any thread waiting for the
// result, stuck for ever. The watchdog's thread
// follows each watched collective (an event queued after it on the communication stream) and,
// when one has not finished by its deadline or NCCL reports an asynchronous error, aborts every
// communicator it has watched: the kernels end, waits return (with garbage), and status() says
// why, for the group to report on every later call.
#ifndef KILN_DISTRIBUTED_NCCL_NCCL_WATCHDOG_H_
#define KILN_DISTRIBUTED_NCCL_NCCL_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "distributed/nccl/nccl_comm.h"

namespace kiln::cuda {

class NcclWatchdog {
 public:
  // Watches over `comms` (a group's communicators, which must outlive the watchdog): any
  // failure aborts them all. The deadline counts from when a collective is queued, so it
  // includes the wait for the compute that produces its input.
  NcclWatchdog(std::chrono::milliseconds timeout, std::vector<NcclComm*> comms);
  // Waits for the collectives it follows to finish or be aborted at their deadline.
  ~NcclWatchdog();
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  // Follows what is queued on these communicators' streams now; `what` names it in an error.
  absl::Status Watch(const std::vector<NcclComm*>& comms, std::string what);
  // Aborts every watched communicator with this reason (a failure found elsewhere).
  void Fail(absl::Status why);
  // OK, or why the communicators were aborted (they are unusable then).
  absl::Status status() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    std::vector<std::pair<NcclComm*, DeviceBuffer::Event>> done;  // one event per communicator
    Clock::time_point start;
    std::string what;
  };
  void Loop();
  // Why `p` must be given up on, or OK while it may still finish (mu_ held).
  absl::Status Check(const Pending& p) const;
  // Records why (mu_ held) and returns the communicators to abort, outside mu_ (an abort can
  // take a while); empty when an earlier failure already did.
  std::vector<NcclComm*> Failing(const absl::Status& why);

  const std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::list<Pending> pending_;
  const std::vector<NcclComm*> comms_;
  absl::Status status_;
  bool stop_ = false;
  std::thread thread_;  // last, so that everything it uses exists first
};

}  // namespace kiln::cuda

#endif  // KILN_DISTRIBUTED_NCCL_NCCL_WATCHDOG_H_
