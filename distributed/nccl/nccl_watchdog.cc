#include "distributed/nccl/nccl_watchdog.h"

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_error.h"

namespace kiln::cuda {

NcclWatchdog::NcclWatchdog(std::chrono::milliseconds timeout, std::vector<NcclComm*> comms)
    : timeout_(timeout), comms_(std::move(comms)), thread_([this] { Loop(); }) {}

NcclWatchdog::~NcclWatchdog() {
  // Collectives still running get their deadline first, so that the communicators are idle or
  // aborted when they are destroyed: teardown after a peer died takes one timeout, not one
  // per communicator.
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (pending_.empty() || !status_.ok()) {
        stop_ = true;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  wake_.notify_all();
  thread_.join();
}

absl::Status NcclWatchdog::Watch(const std::vector<NcclComm*>& comms, std::string what) {
  Pending p{.start = Clock::now(), .what = std::move(what)};
  for (NcclComm* comm : comms) {
    cudaEvent_t event = nullptr;
    absl::Status s = CudaStatus(cudaSetDevice(comm->device().index()), "watchdog: cudaSetDevice");
    if (s.ok()) s = CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "watchdog: cudaEventCreate");
    if (!s.ok()) return s;
    DeviceBuffer::Event done(event, [](cudaEvent_t e) { cudaEventDestroy(e); });
    if (s = CudaStatus(cudaEventRecord(event, comm->stream()), "watchdog: cudaEventRecord"); !s.ok()) return s;
    p.done.emplace_back(comm, std::move(done));
  }
  {
    std::lock_guard lock(mu_);
    if (!status_.ok()) return status_;
    pending_.push_back(std::move(p));
  }
  wake_.notify_all();
  return absl::OkStatus();
}

void NcclWatchdog::Fail(absl::Status why) {
  std::vector<NcclComm*> doomed;
  {
    std::lock_guard lock(mu_);
    doomed = Failing(why);
  }
  for (NcclComm* comm : doomed) comm->Abort();
}

absl::Status NcclWatchdog::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

absl::Status NcclWatchdog::Check(const Pending& p) const {
  for (const auto& [comm, event] : p.done) {
    if (comm->aborted()) continue;  // whoever aborted it reports why (NcclWatchdog::Fail)
    if (absl::Status s = comm->AsyncError(); !s.ok()) {
      return absl::UnavailableError(absl::StrCat(p.what, " failed: ", s.message()));
    }
  }
  if (std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - p.start) > timeout_) {
    return absl::DeadlineExceededError(absl::StrCat(
        p.what, " did not finish within ", timeout_.count(),
        " ms: a peer (another process, or a device of this one) may have died or stopped calling collectives"));
  }
  return absl::OkStatus();
}

std::vector<NcclComm*> NcclWatchdog::Failing(const absl::Status& why) {
  if (!status_.ok()) return {};
  status_ = absl::Status(
      why.code(),
      absl::StrCat("NCCL: ", why.message(), "; its communicators were aborted, the group is unusable from now on"));
  pending_.clear();
  return comms_;
}

void NcclWatchdog::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (pending_.empty()) {
      wake_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      continue;
    }
    // Polls: NCCL and CUDA have no wait with a deadline that also sees asynchronous errors.
    wake_.wait_for(lock, std::chrono::milliseconds(2), [&] { return stop_; });
    for (auto it = pending_.begin(); it != pending_.end() && status_.ok();) {
      bool finished = true;
      absl::Status failed;
      for (const auto& [comm, event] : it->done) {
        const cudaError_t e = cudaEventQuery(event.get());
        if (e == cudaErrorNotReady) {
          finished = false;
        } else if (e != cudaSuccess) {
          failed = CudaStatus(e, absl::StrCat(it->what, ": waiting for NCCL"));
        }
      }
      if (finished && failed.ok()) {
        it = pending_.erase(it);
        continue;
      }
      if (failed.ok()) failed = Check(*it);
      if (!failed.ok()) {
        const std::vector<NcclComm*> doomed = Failing(failed);
        lock.unlock();
        for (NcclComm* comm : doomed) comm->Abort();
        lock.lock();
        break;
      }
      ++it;
    }
  }
}

}  // namespace kiln::cuda
