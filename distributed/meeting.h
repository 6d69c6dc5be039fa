// Meeting: where the members of an in-process device group meet for one collective. Each
// member's thread arrives with its contribution; the round proceeds when all have arrived, or
// fails for everyone at the deadline. A failed round breaks the group for good (as an aborted
// NCCL communicator is), so no member can run on with half a result.
#ifndef KILN_DISTRIBUTED_MEETING_H_
#define KILN_DISTRIBUTED_MEETING_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "distributed/timeout.h"

namespace kiln::distributed {

class Meeting {
 public:
  // Throws kiln::Error (InvalidArgument) for a timeout CheckTimeout refuses.
  Meeting(int size, std::chrono::milliseconds timeout);

  // Waits until every member has arrived for this member's next round. `signature` describes
  // the call (op, tag, shape, dtype); signatures that differ fail the round for every member
  // with InvalidArgument naming them. (Members publish their data in their own slots first.)
  absl::Status Arrive(int member, std::string signature);
  // A meeting inside a round: every member has written its part of a shared output (for
  // backends whose members then copy that output rather than share it).
  absl::Status Settle(int member);
  // The last meeting of a round: nobody leaves (and frees what the others read) before all
  // have finished their part.
  absl::Status Depart(int member);
  // A meeting for work that needs every member's part done first (the cross-process stage of
  // a collective): when all have arrived, the last to arrive runs `fn` while the others wait
  // without a deadline (fn has its own), and every member returns fn's status. Only the
  // arrival has a deadline.
  absl::Status Together(int member, const std::function<absl::Status()>& fn);
  // Runs once per round, by the first member to call it, while the others wait; for work
  // that must happen once (allocating a shared output).
  void Once(const std::function<void()>& fn);

  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  // A barrier with a deadline; `phase` counts meetings so that a fast member's next round
  // cannot be mistaken for this one.
  absl::Status Meet(std::unique_lock<std::mutex>& lock, int member, const char* stage,
                    const std::function<absl::Status()>* fn = nullptr);
  std::string Missing(const std::vector<bool>& here) const;

  const int size_;
  const std::chrono::milliseconds timeout_;
  const bool spin_;  // waiting members spin a little before they sleep (spin_wait.h)
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> phase_{0};  // written under mu_; read without it while spinning
  int waiting_ = 0;
  std::vector<bool> here_;
  std::vector<std::string> signatures_;
  bool once_done_ = false;
  bool running_ = false;   // the last member is running Together's fn
  absl::Status together_;  // its result, for the others
  absl::Status broken_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_MEETING_H_
