// The training checkpoints of a data-parallel run, written once for examples/train and
// examples/gpt: resuming (every replica, optimizer and random stream from the checkpoint
// PlanCheckpoints chose, after checking that it fits this run and that this run could have
// written it) and saving (every rank gathers the random streams, rank 0 copies the state to
// the host and a thread of its own writes it as the plan's run), with the time training
// waited for each checkpoint.
#ifndef KILN_EXAMPLES_RUN_CHECKPOINTS_H_
#define KILN_EXAMPLES_RUN_CHECKPOINTS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "distributed/data_parallel.h"
#include "examples/checkpoint_flags.h"
#include "examples/checkpoint_plan.h"
#include "examples/run_setup.h"
#include "examples/sharded_checkpoint.h"
#include "examples/train_position.h"
#include "nn/checkpoint_writer.h"
#include "nn/shard_reader.h"
#include "nn/training_checkpoint.h"

namespace kiln {

template <Backend B>
class RunCheckpoints {
 public:
  // `plan`: PlanCheckpoints' (rank 0's holds the folder's lock for the whole run). `settings`:
  // what changes the math, recorded in each checkpoint and compared on resume.
  RunCheckpoints(const CheckpointFlags& flags, CheckpointPlan plan, distributed::Settings settings,
                 distributed::DataParallel<B>& dp, bool lead)
      : flags_(flags), plan_(std::move(plan)), settings_(std::move(settings)), dp_(dp) {
    if (lead && !flags_.dir.empty() && !sharded())
      writer_ = std::make_unique<nn::CheckpointWriter>(flags_.dir, flags_.keep, plan_.run);
  }

  bool enabled() const { return !flags_.dir.empty(); }
  // Whether a step checkpoint is due after `step` steps (--checkpoint_every).
  bool due(int64_t step) const { return flags_.every > 0 && step % flags_.every == 0; }

  // When resuming, sets every replica, optimizer and random stream and returns where the
  // checkpoint stood (`here` describes this run's world, for a note when it differs), after
  // checking it against `rules`; nothing changes unless the whole checkpoint fits. Otherwise
  // returns `here`. Throws UsageError.
  TrainPosition Resume(const TrainPosition& here, PositionRules rules) {
    if (plan_.resume_path.empty()) return here;
    const std::string& path = plan_.resume_path;
    ReadChosenIfNeeded(path);
    const std::optional<nn::TrainingCheckpoint> checkpoint = std::move(plan_.checkpoint);
    const std::optional<nn::ShardIndex> index = std::move(plan_.sharded);
    plan_.checkpoint.reset();
    plan_.sharded.reset();
    const std::map<std::string, std::string>& metadata = checkpoint ? checkpoint->state.metadata : index->plan.metadata;
    auto at = ParsePosition(metadata, settings_, path);
    if (!at.ok()) throw UsageError{absl::StrCat("--resume: ", at.status().message())};
    int64_t optimizer_steps = 0;
    const auto steps = metadata.find("optimizer.steps");
    if (steps == metadata.end() || !nn::ParseOptimizerSteps(steps->second, &optimizer_steps)) {
      throw UsageError{absl::StrCat("--resume: ", path, ": the training state has no valid optimizer.steps")};
    }
    rules.loss_scaler = dp_.loss_scaler();
    if (absl::Status s = CheckPosition(*at, optimizer_steps, rules, path); !s.ok()) {
      throw UsageError{absl::StrCat("--resume: ", s.message())};
    }
    // Everything is checked before anything changes: the streams' count here, replica 0 whole in
    // RestoreTraining (the others are the same model).
    const int members = static_cast<int>(at->members);
    if (absl::Status s = dp_.CheckGeneratorStates(at->generators, members); !s.ok()) {
      throw UsageError{absl::StrCat("--resume=", path, ": ", s.message())};
    }
    if (checkpoint) {
      RestoreModelAndOptimizer(*checkpoint, path);
    } else if (dp_.sharding() == distributed::Sharding::kNone) {
      RestoreModelAndOptimizer(ReadWhole(*index, path), path);
    } else {
      RestoreChunks(*index, path, optimizer_steps);
    }
    if (nn::LossScaler* scaler = dp_.mutable_loss_scaler(); scaler != nullptr) {
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
  // gathered over every member). Unsharded, rank 0 writes the whole form on its writer's thread
  // and this returns the previous write's error, if any; sharded, every rank writes its
  // members' chunks (no gather) and rank 0 the index, before this returns the same status on
  // every rank.
  absl::Status Save(TrainPosition at) {
    const auto begin = std::chrono::steady_clock::now();
    auto states = dp_.GeneratorStates();
    if (!states.ok()) return states.status();
    at.generators = *std::move(states);
    if (const nn::LossScaler* scaler = dp_.loss_scaler()) {
      at.loss_scale = scaler->scale();
      at.loss_scale_good_steps = scaler->good_steps();
    }
    absl::Status s;
    if (sharded()) {
      if (!enabled()) return absl::OkStatus();
      s = SaveSharded(at);
    } else {
      if (!writer_) return absl::OkStatus();
      s = writer_->Write(at.step,
                         nn::SnapshotTraining(dp_.replica(0), dp_.optimizer(0), PositionMetadata(at, settings_)));
    }
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
  // The chosen checkpoint (either form) into plan_, unless rank 0 has read it already.
  void ReadChosenIfNeeded(const std::string& path) {
    if (plan_.checkpoint || plan_.sharded) return;
    const bool sharded = IsShardedCheckpoint(path);
    auto index = sharded ? ReadShardedCheckpointIndex(path) : absl::StatusOr<nn::ShardIndex>();
    auto read = sharded ? absl::StatusOr<nn::TrainingCheckpoint>() : nn::ReadTrainingCheckpoint(path);
    const absl::Status status = sharded ? index.status() : read.status();
    if (!status.ok()) throw UsageError{absl::StrCat("--resume=", path, ": ", status.message())};
    if (sharded) plan_.sharded = *std::move(index);
    if (!sharded) plan_.checkpoint = *std::move(read);
  }

  bool sharded() const { return dp_.sharding() != distributed::Sharding::kNone; }

  // The sharded form (sharded_checkpoint.h): each local member's chunks, as they lie.
  absl::Status SaveSharded(const TrainPosition& at) {
    nn::ShardPlan plan{.world = dp_.group().global_size(), .stage = distributed::ShardingName(dp_.sharding())};
    plan.metadata = PositionMetadata(at, settings_);
    plan.metadata[nn::kRunKey] = plan_.run;
    plan.metadata["optimizer"] = dp_.optimizer(0).name();
    plan.metadata["optimizer.steps"] = absl::StrCat(dp_.optimizer(0).steps());
    const auto streams = dp_.replica(0).named_generators();  // global member 0's come first
    for (size_t i = 0; i < streams.size(); ++i) {
      plan.metadata[nn::kStreamPrefix + streams[i].first] = absl::StrCat(at.generators[i]);
    }
    const ParameterLayout layout = dp_.ParameterLayout();
    std::map<int64_t, nn::MemberChunks> local;
    for (int r = 0; r < dp_.size(); ++r) {
      nn::MemberChunks& chunks = local[dp_.group().global_rank(r)];
      const std::vector<Tensor<B>> params = dp_.ParameterChunks(r);
      for (const auto& [key, t] : dp_.OptimizerChunks(r)) chunks.emplace(key, t.to_data());
      std::vector<std::string> stateless;
      for (size_t i = 0; i < params.size(); ++i) {
        const auto& [name, shape, dtype] = layout[i];
        chunks.emplace(name, params[i].to_data());
        plan.tensors[name] = {shape, dtype};
        bool has = false;
        for (const std::string& slot : dp_.optimizer(r).slots()) {
          const auto it = chunks.find(absl::StrCat(slot, "/", name));
          if (it == chunks.end()) continue;
          plan.tensors[it->first] = {shape, it->second.dtype()};
          has = true;
        }
        if (!has) stateless.push_back(name);
      }
      plan.metadata[nn::kStatelessKey] = absl::StrJoin(stateless, ",");
    }
    SealMetadata(plan.metadata);
    return WriteShardedCheckpoint(plan_.group, flags_.dir, at.step, flags_.keep, plan_.run, plan, local);
  }

  // The whole form of a sharded checkpoint, for unsharded members (each holds every tensor).
  nn::TrainingCheckpoint ReadWhole(const nn::ShardIndex& index, const std::string& path) {
    const nn::Optimizer<B>& optimizer = dp_.optimizer(0);
    if (absl::Status s = CheckShardedFits(index, path, dp_.ParameterLayout(), optimizer.name(), optimizer.slots());
        !s.ok()) {
      throw UsageError{absl::StrCat("--resume: ", s.message())};
    }
    absl::StatusOr<nn::TrainingCheckpoint> whole = ReadWholeCheckpoint(path, index);
    if (absl::Status s = AgreeOnRanks(plan_.group, whole.status(), "reading the checkpoint"); !s.ok()) {
      throw UsageError{absl::StrCat("--resume: ", s.message())};
    }
    return *std::move(whole);
  }

  // Every local member's chunks from a sharded checkpoint of any world size and stage (read
  // resharded to this run's members), installed once every rank has read its own.
  void RestoreChunks(const nn::ShardIndex& index, const std::string& path, int64_t optimizer_steps) {
    const ParameterLayout layout = dp_.ParameterLayout();
    const nn::Optimizer<B>& optimizer = dp_.optimizer(0);
    if (absl::Status s = CheckShardedFits(index, path, layout, optimizer.name(), optimizer.slots()); !s.ok()) {
      throw UsageError{absl::StrCat("--resume: ", s.message())};
    }
    std::vector<std::vector<Tensor<B>>> params(dp_.size());
    std::vector<typename nn::Optimizer<B>::State> state(dp_.size());
    absl::Status read;
    for (int r = 0; r < dp_.size() && read.ok(); ++r) {
      auto chunks = nn::ReadShard(path, index, dp_.group().global_size(), dp_.group().global_rank(r));
      if (!chunks.ok()) {
        read = chunks.status();
        break;
      }
      const auto device = dp_.group().devices()[r];
      for (const auto& [name, shape, dtype] : layout)
        params[r].push_back(Tensor<B>::from_data(chunks->at(name), device));
      for (const auto& [name, data] : *chunks) {
        if (nn::IsOptimizerSlot(name)) state[r].emplace(name, Tensor<B>::from_data(data, device));
      }
    }
    if (absl::Status s = AgreeOnRanks(plan_.group, read, "reading its shards"); !s.ok()) {
      throw UsageError{absl::StrCat("--resume: ", s.message())};
    }
    if (absl::Status s = dp_.LoadChunks(std::move(params), std::move(state), optimizer_steps); !s.ok()) {
      throw RunFailure{std::string(s.message())};
    }
  }

  // Every replica and optimizer from the checkpoint (nothing changes unless all of it fits).
  // The checkpoint holds the whole optimizer, whatever stage wrote it: sharded, it is read
  // whole and each member keeps its chunks.
  void RestoreModelAndOptimizer(const nn::TrainingCheckpoint& checkpoint, const std::string& path) {
    const bool sharded = dp_.sharding() != distributed::Sharding::kNone;
    std::unique_ptr<nn::Optimizer<B>> full = sharded ? dp_.NewOptimizer() : nullptr;
    for (int r = 0; r < dp_.size(); ++r) {
      nn::Optimizer<B>& optimizer = sharded ? *full : dp_.optimizer(r);
      if (absl::Status s = nn::RestoreTraining(checkpoint, path, dp_.replica(r), optimizer); !s.ok()) {
        throw UsageError{absl::StrCat("--resume: ", s.message())};
      }
    }
    if (sharded) dp_.LoadFullOptimizer(*full);
    dp_.ReshardParameters();  // ZeRO-3: each member keeps its chunks of what was loaded
  }

  const CheckpointFlags flags_;
  CheckpointPlan plan_;  // before writer_: the lock outlives the last write
  const distributed::Settings settings_;
  distributed::DataParallel<B>& dp_;
  std::unique_ptr<nn::CheckpointWriter> writer_;
  int64_t resumed_step_ = -1, written_ = 0;
  double stall_seconds_ = 0;
};

}  // namespace kiln

#endif  // KILN_EXAMPLES_RUN_CHECKPOINTS_H_
