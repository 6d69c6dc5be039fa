#include "distributed/member_threads.h"

#include <exception>
#include <new>

#include "absl/strings/str_cat.h"
#include "tensor/error.h"

namespace kiln::distributed {

MemberThreads::MemberThreads(int size) : results_(size) {
  for (int r = 0; r < size; ++r) threads_.emplace_back([this, r] { Loop(r); });
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
  std::unique_lock lock(mu_);
  job_ = &job;
  running_ = static_cast<int>(threads_.size());
  ++generation_;
  cv_.notify_all();
  cv_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
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
    absl::Status status;
    try {
      status = (*job)(member);
    } catch (const Error& e) {
      status = e.status();
    } catch (const std::bad_alloc&) {  // escaping a thread would abort the whole program
      status = absl::ResourceExhaustedError(
          absl::StrCat("member ", member, " ran out of memory (std::bad_alloc): make the model or the batch smaller"));
    } catch (const std::exception& e) {
      status = absl::InternalError(absl::StrCat("member ", member, ": ", e.what()));
    }
    lock.lock();
    results_[member] = status;
    if (--running_ == 0) cv_.notify_all();
  }
}

}  // namespace kiln::distributed
