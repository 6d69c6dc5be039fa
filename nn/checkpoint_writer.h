// Writes training checkpoints on a thread of its own, so that training waits only for the
// host copy (SnapshotTraining), not for serialising, writing and flushing to disk.
#ifndef KILN_NN_CHECKPOINT_WRITER_H_
#define KILN_NN_CHECKPOINT_WRITER_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "nn/training_checkpoint.h"

namespace kiln::nn {

class CheckpointWriter {
 public:
  // Checkpoints go to `dir`, written as `run`'s; after each write all of `run`'s but the
  // newest `keep` are removed (PruneTrainingCheckpoints). A failed removal is a warning on
  // stderr, not an error: the checkpoint it follows was written.
  CheckpointWriter(std::string dir, int keep, std::string run);
  ~CheckpointWriter();  // finishes the write in flight
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Hands `checkpoint` to the writing thread, after the previous one is written: one write at
  // a time, so memory holds at most two snapshots. Returns the previous write's error, if it
  // failed (then this one is not started).
  absl::Status Write(int64_t step, TrainingCheckpoint checkpoint);
  // Waits for the write in flight; its status.
  absl::Status Flush();

 private:
  void Loop();

  const std::string dir_;
  const int keep_;
  const std::string run_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::pair<int64_t, TrainingCheckpoint>> pending_;
  bool writing_ = false, stop_ = false;
  absl::Status status_;
  std::thread thread_;
};

}  // namespace kiln::nn

#endif  // KILN_NN_CHECKPOINT_WRITER_H_
