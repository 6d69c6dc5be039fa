#include "nn/checkpoint_writer.h"

#include <cstdio>
#include <utility>

namespace kiln::nn {

CheckpointWriter::CheckpointWriter(std::string dir, int keep, std::string run)
    : dir_(std::move(dir)), keep_(keep), run_(std::move(run)), thread_([this] { Loop(); }) {}

CheckpointWriter::~CheckpointWriter() {
  (void)Flush();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

absl::Status CheckpointWriter::Write(int64_t step, TrainingCheckpoint checkpoint) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !pending_ && !writing_; });
  if (!status_.ok()) return status_;
  checkpoint.state.metadata[kRunKey] = run_;
  pending_.emplace(step, std::move(checkpoint));
  cv_.notify_all();
  return absl::OkStatus();
}

absl::Status CheckpointWriter::Flush() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !pending_ && !writing_; });
  return status_;
}

void CheckpointWriter::Loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return pending_ || stop_; });
    if (!pending_) return;
    auto [step, checkpoint] = *std::move(pending_);
    pending_.reset();
    writing_ = true;
    lock.unlock();
    const absl::Status status = WriteTrainingCheckpoint(dir_, step, std::move(checkpoint));
    if (status.ok()) {
      if (absl::Status pruned = PruneTrainingCheckpoints(dir_, keep_, run_); !pruned.ok()) {
        std::fprintf(stderr, "checkpoint: warning: %s (the checkpoint of step %lld is written)\n",
                     std::string(pruned.message()).c_str(), static_cast<long long>(step));
      }
    }
    lock.lock();
    writing_ = false;
    if (!status.ok() && status_.ok()) status_ = status;
    cv_.notify_all();
  }
}

}  // namespace kiln::nn
