#include "distributed/meeting.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "distributed/spin_wait.h"
#include "tensor/error.h"

namespace kiln::distributed {

Meeting::Meeting(int size, std::chrono::milliseconds timeout) : size_(size), timeout_(timeout), spin_(SpinPays(size)) {
  if (absl::Status s = CheckTimeout(timeout, "device group"); !s.ok()) throw Error(s);
}

std::string Meeting::Missing(const std::vector<bool>& here) const {
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (!here[r]) missing.push_back(r);
  }
  return absl::StrJoin(missing, ", ");
}

absl::Status Meeting::Meet(std::unique_lock<std::mutex>& lock, int member, const char* stage,
                           const std::function<absl::Status()>* fn) {
  if (!broken_.ok()) return broken_;
  if (here_.empty()) here_.assign(size_, false);
  here_[member] = true;
  const uint64_t phase = phase_;
  if (++waiting_ == size_) {
    if (fn != nullptr) {
      running_ = true;
      lock.unlock();
      absl::Status s = (*fn)();
      lock.lock();
      running_ = false;
      together_ = s;
    }
    waiting_ = 0;
    here_.assign(size_, false);
    ++phase_;
    cv_.notify_all();
    return fn != nullptr ? together_ : absl::OkStatus();
  }
  if (spin_) {  // the last member is usually microseconds away: catch it without sleeping
    lock.unlock();
    SpinUntil([&] { return phase_.load(std::memory_order_acquire) != phase; }, kMeetingSpin);
    lock.lock();
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (phase_ == phase && broken_.ok()) {
    if (running_) {
      cv_.wait(lock);
    } else if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && phase_ == phase && broken_.ok() &&
               !running_) {
      broken_ = absl::DeadlineExceededError(absl::StrCat("collective ", stage, ": member(s) ", Missing(here_), " of ",
                                                         size_, " did not arrive within ", timeout_.count(),
                                                         " ms; the group is unusable from now on"));
      cv_.notify_all();
    }
  }
  if (phase_ == phase) return broken_;
  return fn != nullptr ? together_ : absl::OkStatus();
}

absl::Status Meeting::Arrive(int member, std::string signature) {
  std::unique_lock lock(mu_);
  if (signatures_.empty()) signatures_.resize(size_);
  signatures_[member] = std::move(signature);
  once_done_ = false;
  if (absl::Status s = Meet(lock, member, "arrival"); !s.ok()) return s;
  for (int r = 1; r < size_; ++r) {
    if (signatures_[r] != signatures_[0]) {
      return absl::InvalidArgumentError(
          absl::StrCat("collective members disagree: member 0 called ", signatures_[0], " but member ", r, " called ",
                       signatures_[r], "; every member must make the same call with tensors of one shape and dtype"));
    }
  }
  return absl::OkStatus();
}

void Meeting::Once(const std::function<void()>& fn) {
  std::lock_guard lock(mu_);
  if (!once_done_) {
    fn();
    once_done_ = true;
  }
}

absl::Status Meeting::Together(int member, const std::function<absl::Status()>& fn) {
  std::unique_lock lock(mu_);
  return Meet(lock, member, "cross-process stage", &fn);
}

absl::Status Meeting::Settle(int member) {
  std::unique_lock lock(mu_);
  return Meet(lock, member, "completion");
}

absl::Status Meeting::Depart(int member) {
  std::unique_lock lock(mu_);
  return Meet(lock, member, "departure");
}

}  // namespace kiln::distributed
