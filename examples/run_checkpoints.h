// The training checkpoints of a data-parallel run, written once for examples/train and
// examples/gpt: resuming (every replica, optimizer and random stream from the checkpoint
// --resume names, after checking that it fits this run) and saving (every rank gathers the
// random streams, rank 0 copies the state to the host and a thread of its own writes it),
// with the time training waited for each checkpoint.
#ifndef KILN_EXAMPLES_RUN_CHECKPOINTS_H_
#define KILN_EXAMPLES_RUN_CHECKPOINTS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "distributed/data_parallel.h"
#include "examples/checkpoint_flags.h"
#include "examples/run_setup.h"
#include "examples/train_position.h"
#include "nn/checkpoint_writer.h"
#include "nn/training_checkpoint.h"

namespace kiln {

template <Backend B>
class RunCheckpoints {
 public:
  // `resume_path`: ResumePath(flags) as every rank agreed on it. `settings`: what changes the
  // math, recorded in each checkpoint and compared on resume. Throws UsageError for a
  // checkpoint folder rank 0 cannot write.
  RunCheckpoints(const CheckpointFlags& flags, std::string resume_path, distributed::Settings settings,
                 distributed::DataParallel<B>& dp, bool lead)
      : flags_(flags), resume_path_(std::move(resume_path)), settings_(std::move(settings)), dp_(dp) {
    if (!lead || flags_.dir.empty()) return;
    if (absl::Status s = nn::CheckCheckpointDir(flags_.dir); !s.ok()) {
      throw UsageError{absl::StrCat("--checkpoint_dir=", flags_.dir, ": ", s.message())};
    }
    writer_ = std::make_unique<nn::CheckpointWriter>(flags_.dir, flags_.keep);
  }

  bool enabled() const { return !flags_.dir.empty(); }
  // Whether a step checkpoint is due after `step` steps (--checkpoint_every).
  bool due(int64_t step) const { return flags_.every > 0 && step % flags_.every == 0; }

  // With --resume, sets every replica, optimizer and random stream and returns where the
  // checkpoint stood (`here` describes this run's world, for a note when it differs); nothing
  // changes unless the whole checkpoint fits. Without, returns `here`. Throws UsageError.
  TrainPosition Resume(const TrainPosition& here) {
    if (resume_path_.empty()) return here;
    const std::string& path = resume_path_;
    auto checkpoint = nn::ReadTrainingCheckpoint(path);
    if (!checkpoint.ok()) throw UsageError{absl::StrCat("--resume=", path, ": ", checkpoint.status().message())};
    auto at = ParsePosition(checkpoint->state.metadata, settings_, path);
    if (!at.ok()) throw UsageError{absl::StrCat("--resume: ", at.status().message())};
    // Everything is checked before anything changes: the streams' count here, replica 0 whole in
    // RestoreTraining (the others are the same model).
    const int members = static_cast<int>(at->members);
    if (absl::Status s = dp_.CheckGeneratorStates(at->generators, members); !s.ok()) {
      throw UsageError{absl::StrCat("--resume=", path, ": ", s.message())};
    }
    for (int r = 0; r < dp_.size(); ++r) {
      if (absl::Status s = nn::RestoreTraining(*checkpoint, path, dp_.replica(r), dp_.optimizer(r)); !s.ok()) {
        throw UsageError{absl::StrCat("--resume: ", s.message())};
      }
    }
    if (nn::LossScaler* scaler = dp_.mutable_loss_scaler(); scaler != nullptr && at->loss_scale > 0) {
      try {
        scaler->Restore(at->loss_scale, at->loss_scale_good_steps);
      } catch (const Error& e) {
        throw UsageError{absl::StrCat("--resume=", path, ": ", e.status().message())};
      }
    }
    // After RestoreTraining, which set every replica's streams to the saved replica 0's.
    if (absl::Status s = dp_.SetGeneratorStates(at->generators, members); !s.ok()) {
      throw UsageError{absl::StrCat("--resume=", path, ": ", s.message())};
    }
    if (at->members != here.members) {
      std::fprintf(stderr, "resuming on %lld devices (%s) from a checkpoint of %lld (%s)\n",
                   static_cast<long long>(here.members), here.devices.c_str(), static_cast<long long>(at->members),
                   at->devices.c_str());
    }
    resumed_step_ = at->step;
    at->members = here.members;
    at->devices = here.devices;
    return *std::move(at);
  }
  int64_t resumed_step() const { return resumed_step_; }  // -1: a fresh start

  // A checkpoint at `at`. Every rank calls it at the same step (the random streams are
  // gathered over every member); rank 0 writes. Returns the previous write's error, if any.
  absl::Status Save(TrainPosition at) {
    const auto begin = std::chrono::steady_clock::now();
    auto states = dp_.GeneratorStates();
    if (!states.ok()) return states.status();
    if (!writer_) return absl::OkStatus();
    at.generators = *std::move(states);
    if (const nn::LossScaler* scaler = dp_.loss_scaler()) {
      at.loss_scale = scaler->scale();
      at.loss_scale_good_steps = scaler->good_steps();
    }
    const absl::Status s = writer_->Write(
        at.step, nn::SnapshotTraining(dp_.replica(0), dp_.optimizer(0), PositionMetadata(at, settings_)));
    stall_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    ++written_;
    return s;
  }
  // Waits for the last write.
  absl::Status Finish() { return writer_ ? writer_->Flush() : absl::OkStatus(); }

  // For the program's JSON line: ,"resumed_from_step":N,"checkpoints":N,"checkpoint_stall_ms":x
  std::string JsonFields() const {
    std::string out;
    if (resumed_step_ >= 0) absl::StrAppend(&out, ",\"resumed_from_step\":", resumed_step_);
    if (written_ > 0) {
      absl::StrAppend(&out, ",\"checkpoints\":", written_,
                      ",\"checkpoint_stall_ms\":", absl::StrFormat("%.3f", stall_seconds_ * 1e3 / written_));
    }
    return out;
  }

 private:
  const CheckpointFlags flags_;
  const std::string resume_path_;
  const distributed::Settings settings_;
  distributed::DataParallel<B>& dp_;
  std::unique_ptr<nn::CheckpointWriter> writer_;
  int64_t resumed_step_ = -1, written_ = 0;
  double stall_seconds_ = 0;
};

}  // namespace kiln

#endif  // KILN_EXAMPLES_RUN_CHECKPOINTS_H_
