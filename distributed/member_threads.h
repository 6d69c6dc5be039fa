// MemberThreads: one long-lived thread per member of a group, each running its part of a job;
// Run returns when every member is done. (Starting threads per step would cost more than a
// small model's step.)
#ifndef KILN_DISTRIBUTED_MEMBER_THREADS_H_
#define KILN_DISTRIBUTED_MEMBER_THREADS_H_

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

  // Runs job(member) on every member's thread; the first error (a kiln::Error thrown by the job
  // counts as its status, std::bad_alloc as ResourceExhausted, any other exception as Internal:
  // nothing escapes a member's thread to abort the program).
  absl::Status Run(const std::function<absl::Status(int member)>& job);

 private:
  void Loop(int member);

  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<absl::Status(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::vector<absl::Status> results_;
  std::vector<std::thread> threads_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_MEMBER_THREADS_H_
