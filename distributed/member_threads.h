// MemberThreads: runs a job once per member of a group, all at once; Run returns when every
// member is done. Member 0 runs on the thread that calls Run, each other member on a long-lived
// thread of its own (starting threads per step would cost more than a small model's step).
// Member 0 on the caller saves a hand-off per step: the caller would otherwise sleep while a
// thread it woke did the same work, and on 2 cores with 2 members a wake-up of a sleeping
// thread costs about as much as a small model's collective.
#ifndef KILN_DISTRIBUTED_MEMBER_THREADS_H_
#define KILN_DISTRIBUTED_MEMBER_THREADS_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace kiln::distributed {

class MemberThreads {
 public:
  explicit MemberThreads(int size);
  ~MemberThreads();
  MemberThreads(const MemberThreads&) = delete;
  MemberThreads& operator=(const MemberThreads&) = delete;

  // Runs job(member) for every member, member 0 on this thread (with autodiff recording on, as
  // on a thread of its own, whatever this thread's grad mode; restored after); the first error
  // (a kiln::Error thrown by the job counts as its status, std::bad_alloc as ResourceExhausted,
  // any other exception as Internal: nothing escapes a member's thread to abort the program).
  // Member 0 should always be run from the same thread, as a training loop does: it is that
  // member's thread.
  absl::Status Run(const std::function<absl::Status(int member)>& job);

 private:
  void Loop(int member);

  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<absl::Status(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  // Members past 0 still working on this generation: changed under mu_ (the condition
  // variable's predicate), read without it while member 0 spins.
  std::atomic<int> running_{0};
  bool stop_ = false;
  const bool spin_;  // member 0 spins briefly for the others before it sleeps (spin_wait.h)
  std::vector<absl::Status> results_;
  std::vector<std::thread> threads_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_MEMBER_THREADS_H_
