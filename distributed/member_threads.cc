#include "distributed/member_threads.h"

#include <exception>
#include <new>

#include "absl/strings/str_cat.h"
#include "autodiff/grad_mode.h"
#include "distributed/spin_wait.h"
#include "tensor/error.h"

namespace kiln::distributed {
namespace {

// job(member), with whatever it throws as its status.
absl::Status Guarded(const std::function<absl::Status(int)>& job, int member) {
  try {
    return job(member);
  } catch (const Error& e) {
    return e.status();
  } catch (const std::bad_alloc&) {  // escaping a thread would abort the whole program
    return absl::ResourceExhaustedError(
        absl::StrCat("member ", member, " ran out of memory (std::bad_alloc): make the model or the batch smaller"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("member ", member, ": ", e.what()));
  }
}

}  // namespace

MemberThreads::MemberThreads(int size) : spin_(SpinPays(size)), results_(size) {
  for (int r = 1; r < size; ++r) threads_.emplace_back([this, r] { Loop(r); });
}

MemberThreads::~MemberThreads() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

absl::Status MemberThreads::Run(const std::function<absl::Status(int)>& job) {
  const int others = static_cast<int>(threads_.size());
  if (others > 0) {
    std::lock_guard lock(mu_);
    job_ = &job;
    running_.store(others, std::memory_order_relaxed);
    ++generation_;
  }
  if (others > 0) cv_.notify_all();
  {
    EnableGradScope recording;  // as on a member's own thread, where recording is on
    results_[0] = Guarded(job, 0);
  }
  if (others > 0) {
    // The others did the same work: they are usually microseconds away.
    if (spin_) SpinUntil([&] { return running_.load(std::memory_order_acquire) == 0; }, kMeetingSpin);
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return running_ == 0; });
    job_ = nullptr;
  }
  for (const absl::Status& s : results_) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void MemberThreads::Loop(int member) {
  uint64_t seen = 0;
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const auto* job = job_;
    lock.unlock();
    const absl::Status status = Guarded(*job, member);
    lock.lock();
    results_[member] = status;
    if (running_.fetch_sub(1, std::memory_order_release) == 1) cv_.notify_all();
  }
}

}  // namespace kiln::distributed
