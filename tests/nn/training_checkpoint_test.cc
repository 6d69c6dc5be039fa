// Training checkpoint folders: written whole or not at all, listed past what interrupted writes
// leave, a run's own old ones pruned and nobody else's, the same step replaced only when it is
// the run's own, damage found by the checksum, and a module, its optimizer (every slot) and
// its random streams restored exactly (all or nothing).
#include "nn/training_checkpoint.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "backends/cpu/cpu_backend.h"
#include "nn/activation.h"
#include "nn/checkpoint_writer.h"
#include "nn/linear.h"
#include "nn/sequential.h"

namespace kiln::nn {
namespace {

namespace fs = std::filesystem;
using AD = Autodiff<Cpu>;
using T = Tensor<AD>;

std::set<std::string> Entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

class TrainingCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::path(::testing::TempDir()) / ::testing::UnitTest::GetInstance()->current_test_info()->name()).string();
    fs::remove_all(dir_);
  }
  // Linear(3 -> 2), dropout, trained one SGD step so the optimizer has momentum.
  static std::unique_ptr<Sequential<AD>> Model(uint64_t seed) {
    Generator gen(seed);
    auto m = std::make_unique<Sequential<AD>>();
    m->add<Linear<AD>>(3, 2, gen).add<Dropout<AD>>(0.5, seed);
    return m;
  }
  static void Train(Sequential<AD>& m, Sgd<Cpu>& sgd) {
    const T x = T::from_vector(std::vector<float>{1, 2, 3, -1, 0.5f, 2}, {2, 3});
    sgd.step(m, m(x).sum().backward());
  }
  std::string dir_;
};

TEST_F(TrainingCheckpointTest, RestoresParametersOptimizerAndStreamsExactly) {
  auto a = Model(1);
  Sgd<Cpu> sgd_a(0.1, {.momentum = 0.9});
  Train(*a, sgd_a);
  const auto checkpoint = SnapshotTraining(*a, sgd_a, {{"note", "x"}, {"run", "a"}});
  ASSERT_TRUE(WriteTrainingCheckpoint(dir_, 7, checkpoint).ok());
  EXPECT_EQ(Entries(dir_), std::set<std::string>({"step-000000000007"}));
  EXPECT_EQ(Entries(TrainingCheckpointPath(dir_, 7)),
            std::set<std::string>({"model.safetensors", "training_state.safetensors"}));
  // The parameters file holds the parameters only (a strict PyTorch load).
  auto model_file = ReadSafetensors(TrainingCheckpointPath(dir_, 7) + "/model.safetensors");
  ASSERT_TRUE(model_file.ok());
  std::set<std::string> keys;
  for (const auto& [k, v] : model_file->tensors) keys.insert(k);
  EXPECT_EQ(keys, std::set<std::string>({"0.weight", "0.bias"}));

  auto read = ReadTrainingCheckpoint(TrainingCheckpointPath(dir_, 7));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->state.metadata.at("note"), "x");
  auto b = Model(2);
  Sgd<Cpu> sgd_b(0.1, {.momentum = 0.9});
  ASSERT_TRUE(RestoreTraining(*read, TrainingCheckpointPath(dir_, 7), *b, sgd_b).ok());
  // One more step on each: the same bits (momentum restored, not zero).
  Train(*a, sgd_a);
  Train(*b, sgd_b);
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].second->to_data().ToDoubles(), pb[i].second->to_data().ToDoubles()) << pa[i].first;
  }
  // The module's random streams are named by path and copy their state with the module.
  const auto streams = a->named_generators();
  ASSERT_EQ(streams.size(), 1u);
  EXPECT_EQ(streams[0].first, "1.masks");
  const auto copy = a->clone();
  EXPECT_EQ(copy->named_generators()[0].second->state(), streams[0].second->state());
}

// A checkpoint of `run` at `step`.
void Write(const std::string& dir, int64_t step, const std::string& run, Sequential<AD>& m, Sgd<Cpu>& sgd) {
  ASSERT_TRUE(WriteTrainingCheckpoint(dir, step, SnapshotTraining(m, sgd, {{"run", run}})).ok());
}

void FlipByte(const std::string& file, int64_t from_end) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-from_end, std::ios::end);
  char c = 0;
  f.get(c);
  f.seekp(-from_end, std::ios::end);
  f.put(static_cast<char>(c ^ 0x10));
}

TEST_F(TrainingCheckpointTest, ListingSkipsWhatIsNoCheckpointFolder) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1);
  for (int64_t step : {200, 5, 30}) Write(dir_, step, "a", *m, sgd);
  // What a killed writer leaves, a stray file and a link named like a checkpoint.
  fs::create_directories(dir_ + "/.writing-step-300-abcdef");
  std::ofstream(dir_ + "/step-000000000999") << "not a folder";
  fs::create_directory_symlink(TrainingCheckpointPath(dir_, 5), dir_ + "/step-000000000998");
  auto list = ListTrainingCheckpoints(dir_);
  ASSERT_TRUE(list.ok());
  std::vector<int64_t> steps;
  for (const auto& e : *list) steps.push_back(e.step);
  EXPECT_EQ(steps, std::vector<int64_t>({5, 30, 200}));
  EXPECT_EQ(TrainingCheckpointRun(TrainingCheckpointPath(dir_, 30)).value_or(""), "a");
  EXPECT_EQ(ListTrainingCheckpoints(dir_ + "/none").status().code(), absl::StatusCode::kNotFound);
}

// The issue's case: a folder left by an earlier, longer run (and any folder of that name) must
// not make this run delete its own checkpoints, nor be deleted by it.
TEST_F(TrainingCheckpointTest, PruningRemovesOnlyTheRunsOwnOlderCheckpoints) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1);
  for (int64_t step : {5, 30, 200}) Write(dir_, step, "a", *m, sgd);
  for (int64_t step : {100, 900}) Write(dir_, step, "b", *m, sgd);
  fs::create_directories(dir_ + "/step-000000000950");  // no checkpoint inside
  std::ofstream(dir_ + "/step-000000000950/model.safetensors") << "junk";
  fs::create_directories(dir_ + "/.writing-step-300-abcdef");
  ASSERT_TRUE(PruneTrainingCheckpoints(dir_, 1, "a").ok());
  EXPECT_EQ(Entries(dir_), std::set<std::string>(
                               {"step-000000000200", "step-000000000100", "step-000000000900", "step-000000000950"}));
  ASSERT_TRUE(PruneTrainingCheckpoints(dir_, 1, "b").ok());
  EXPECT_EQ(Entries(dir_), std::set<std::string>({"step-000000000200", "step-000000000900", "step-000000000950"}));
  // keep < 1 still keeps the newest: a run never deletes its last checkpoint.
  ASSERT_TRUE(PruneTrainingCheckpoints(dir_, 0, "a").ok());
  EXPECT_TRUE(Entries(dir_).contains("step-000000000200"));
}

TEST_F(TrainingCheckpointTest, TheSameStepIsReplacedOnlyWhenTheRunWroteIt) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1);
  ASSERT_TRUE(WriteTrainingCheckpoint(dir_, 4, SnapshotTraining(*m, sgd, {{"try", "1"}, {"run", "a"}})).ok());
  ASSERT_TRUE(WriteTrainingCheckpoint(dir_, 4, SnapshotTraining(*m, sgd, {{"try", "2"}, {"run", "a"}})).ok());
  EXPECT_EQ(Entries(dir_), std::set<std::string>({"step-000000000004"}));
  EXPECT_EQ(ReadTrainingCheckpoint(TrainingCheckpointPath(dir_, 4))->state.metadata.at("try"), "2");
  // Another run's step 4 is moved aside, whole, not replaced.
  ASSERT_TRUE(WriteTrainingCheckpoint(dir_, 4, SnapshotTraining(*m, sgd, {{"try", "3"}, {"run", "b"}})).ok());
  EXPECT_EQ(ReadTrainingCheckpoint(TrainingCheckpointPath(dir_, 4))->state.metadata.at("try"), "3");
  std::vector<std::string> kept;
  for (const auto& name : Entries(dir_)) {
    if (name.rfind("step-000000000004.kept-", 0) == 0) kept.push_back(name);
  }
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(ReadTrainingCheckpoint(dir_ + "/" + kept[0])->state.metadata.at("try"), "2");
  // A checkpoint must name its run.
  EXPECT_EQ(WriteTrainingCheckpoint(dir_, 5, SnapshotTraining(*m, sgd, {})).message(),
            "a training checkpoint must name its run (metadata \"run\")");
}

TEST_F(TrainingCheckpointTest, AFlippedBitInEitherFileIsDataLoss) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1, {.momentum = 0.9});
  Train(*m, sgd);
  for (const char* file : {"model.safetensors", "training_state.safetensors"}) {
    fs::remove_all(dir_);
    Write(dir_, 3, "a", *m, sgd);
    const std::string c = TrainingCheckpointPath(dir_, 3);
    ASSERT_TRUE(ReadTrainingCheckpoint(c).ok());
    FlipByte(c + "/" + file, 2);  // inside the last tensor's bytes
    const auto read = ReadTrainingCheckpoint(c);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << file;
    EXPECT_TRUE(absl::StartsWith(read.status().message(),
                                 c + ": the checkpoint's files were changed or damaged after they were written "
                                     "(crc32c recorded "))
        << read.status();
  }
}

TEST_F(TrainingCheckpointTest, EveryParameterNeedsEveryOptimizerSlot) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1, {.momentum = 0.9});
  // Before any step every parameter is listed as never stepped, and that restores.
  TrainingCheckpoint fresh = SnapshotTraining(*m, sgd, {});
  EXPECT_EQ(fresh.state.metadata.at("optimizer.stateless"), "0.weight,0.bias");
  EXPECT_TRUE(CheckOptimizerSlots(fresh, "ck", *m, sgd).ok());
  Train(*m, sgd);
  TrainingCheckpoint trained = SnapshotTraining(*m, sgd, {});
  EXPECT_EQ(trained.state.metadata.at("optimizer.stateless"), "");
  EXPECT_TRUE(CheckOptimizerSlots(trained, "ck", *m, sgd).ok());
  // A state without the optimizer's tensors would resume with the momentum reset.
  TrainingCheckpoint cut = trained;
  cut.state.tensors.clear();
  auto b = Model(2);
  Sgd<Cpu> sgd_b(0.1, {.momentum = 0.9});
  const auto before = b->named_parameters()[0].second->to_data().ToDoubles();
  const absl::Status s = RestoreTraining(cut, "ck", *b, sgd_b);
  EXPECT_EQ(s.message(),
            "ck: the training state has no optimizer state for parameter 0.weight (sgd keeps momentum), and its "
            "writer did not list it as never stepped");
  EXPECT_EQ(b->named_parameters()[0].second->to_data().ToDoubles(), before);  // nothing changed
  // State for a parameter listed as never stepped, and a state without the list.
  TrainingCheckpoint listed = trained;
  listed.state.metadata["optimizer.stateless"] = "0.bias";
  EXPECT_EQ(CheckOptimizerSlots(listed, "ck", *m, sgd).message(),
            "ck: parameter 0.bias has optimizer state but is listed as never stepped");
  listed.state.metadata.erase("optimizer.stateless");
  EXPECT_EQ(CheckOptimizerSlots(listed, "ck", *m, sgd).message(), "ck: the training state has no optimizer.stateless");
}

TEST_F(TrainingCheckpointTest, RefusesWhatIsNotACompleteCheckpoint) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1);
  Write(dir_, 1, "a", *m, sgd);
  const std::string c = TrainingCheckpointPath(dir_, 1);
  EXPECT_EQ(ReadTrainingCheckpoint(c + "/model.safetensors").status().message(),
            c + "/model.safetensors is not a checkpoint folder (one with model.safetensors and "
                "training_state.safetensors, as --checkpoint_dir writes)");
  fs::remove(c + "/training_state.safetensors");
  EXPECT_EQ(ReadTrainingCheckpoint(c).status().code(), absl::StatusCode::kNotFound);
  // A state file of another format (here: a plain parameters file).
  fs::copy_file(c + "/model.safetensors", c + "/training_state.safetensors");
  EXPECT_EQ(ReadTrainingCheckpoint(c).status().message(),
            c + "/training_state.safetensors is not a kiln training state (format pt, expected kiln-training-state/2)");
  EXPECT_EQ(TrainingCheckpointRun(c).status().message(),
            c + "/training_state.safetensors is no kiln training state of format kiln-training-state/2 naming its run");
  // A checkpoint of another model changes nothing.
  Write(dir_, 2, "a", *m, sgd);
  auto read = ReadTrainingCheckpoint(TrainingCheckpointPath(dir_, 2));
  ASSERT_TRUE(read.ok());
  Generator gen(3);
  Linear<AD> wider(4, 2, gen);
  const auto before = wider.named_parameters()[0].second->to_data().ToDoubles();
  Sgd<Cpu> other(0.1);
  const absl::Status s = RestoreTraining(*read, TrainingCheckpointPath(dir_, 2), wider, other);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(wider.named_parameters()[0].second->to_data().ToDoubles(), before);
  // A folder that cannot be made.
  std::ofstream(dir_ + "/file") << "x";
  EXPECT_FALSE(CheckCheckpointDir(dir_ + "/file/ck").ok());
}

// A sharded checkpoint (written by other code into NewCheckpointFolder's folder, then placed)
// belongs to the run its index.json names: pruned, replaced and moved aside like a whole one.
// A folder with neither file (an interrupted sharded write) is no checkpoint and left alone.
TEST_F(TrainingCheckpointTest, ShardedFoldersAreOwnedByTheRunTheirIndexNames) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1);
  const auto sharded = [&](int64_t step, const std::string& run) {
    absl::StatusOr<std::string> temp = NewCheckpointFolder(dir_, step);
    ASSERT_TRUE(temp.ok()) << temp.status();
    EXPECT_EQ(fs::path(*temp).filename().string().rfind(".writing-step-", 0), 0u);
    std::ofstream(*temp + "/index.json") << R"({"format": "kiln-sharded-checkpoint/1", "metadata": {"run": ")" << run
                                         << R"("}})";
    ASSERT_TRUE(PlaceTrainingCheckpoint(dir_, step, *temp, run).ok());
  };
  Write(dir_, 1, "a", *m, sgd);
  Write(dir_, 2, "b", *m, sgd);
  sharded(3, "a");
  EXPECT_EQ(TrainingCheckpointRun(TrainingCheckpointPath(dir_, 3)).value_or(""), "a");
  sharded(3, "a");  // its own: replaced
  sharded(2, "a");  // b's: moved aside
  const std::string interrupted = TrainingCheckpointPath(dir_, 4);
  fs::create_directory(interrupted);
  std::ofstream(interrupted + "/shard-0-of-1.safetensors") << "x";
  EXPECT_EQ(TrainingCheckpointRun(interrupted).status().message(),
            interrupted +
                " has neither training_state.safetensors nor index.json (a sharded checkpoint whose writing was "
                "interrupted has no index)");
  std::ofstream(interrupted + "/index.json") << R"({"metadata": {"run": 5}})";
  EXPECT_EQ(TrainingCheckpointRun(interrupted).status().message(),
            interrupted + "/index.json is no sharded checkpoint index naming its run");
  fs::remove(interrupted + "/index.json");
  ASSERT_TRUE(PruneTrainingCheckpoints(dir_, 1, "a").ok());
  std::set<std::string> left;
  for (const auto& name : Entries(dir_)) left.insert(name.rfind("step-000000000002.kept-", 0) == 0 ? "kept" : name);
  EXPECT_EQ(left, std::set<std::string>({"kept", "step-000000000003", "step-000000000004"}));
  EXPECT_EQ(TrainingCheckpointRun(TrainingCheckpointPath(dir_, 3)).value_or(""), "a");
}

TEST_F(TrainingCheckpointTest, TheWriterWritesInOrderOffTheCallingThreadAsItsRun) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1);
  Write(dir_, 2, "someone-else", *m, sgd);
  {
    CheckpointWriter writer(dir_, 2, "w");
    for (int64_t step = 1; step <= 5; ++step) ASSERT_TRUE(writer.Write(step, SnapshotTraining(*m, sgd, {})).ok());
    ASSERT_TRUE(writer.Flush().ok());
  }
  std::set<std::string> left;
  for (const auto& name : Entries(dir_)) {
    if (name.rfind("step-000000000002.kept-", 0) == 0) {
      EXPECT_EQ(TrainingCheckpointRun(dir_ + "/" + name).value_or(""), "someone-else");
    } else {
      left.insert(name);
    }
  }
  EXPECT_EQ(left, std::set<std::string>({"step-000000000004", "step-000000000005"}));
  EXPECT_EQ(TrainingCheckpointRun(TrainingCheckpointPath(dir_, 5)).value_or(""), "w");
  std::ofstream(dir_ + "/blocker") << "x";
  CheckpointWriter failing(dir_ + "/blocker", 2, "w");  // a file where the folder should be
  ASSERT_TRUE(failing.Write(1, SnapshotTraining(*m, sgd, {})).ok());
  EXPECT_FALSE(failing.Flush().ok());
  EXPECT_FALSE(failing.Write(2, SnapshotTraining(*m, sgd, {})).ok());  // the failure sticks
}

// A checkpoint that cannot be pruned (here: a file in it made immutable) is a warning; the run
// goes on, since the checkpoint it follows was written.
TEST_F(TrainingCheckpointTest, AFailedPruneIsAWarningNotAnError) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1);
  Write(dir_, 1, "w", *m, sgd);
  const std::string pinned = TrainingCheckpointPath(dir_, 1) + "/model.safetensors";
  const int fd = open(pinned.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  int flags = 0;
  const bool immutable =
      ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags |= FS_IMMUTABLE_FL, ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0);
  if (!immutable) {
    close(fd);
    GTEST_SKIP() << "this file system or user cannot make a file immutable";
  }
  ::testing::internal::CaptureStderr();
  absl::Status flushed;
  {
    CheckpointWriter writer(dir_, 1, "w");
    ASSERT_TRUE(writer.Write(2, SnapshotTraining(*m, sgd, {})).ok());
    flushed = writer.Flush();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  flags &= ~FS_IMMUTABLE_FL;
  ioctl(fd, FS_IOC_SETFLAGS, &flags);
  close(fd);
  EXPECT_TRUE(flushed.ok()) << flushed;
  EXPECT_TRUE(absl::StrContains(err, "checkpoint: warning: cannot remove " + TrainingCheckpointPath(dir_, 1))) << err;
  EXPECT_TRUE(absl::StrContains(err, "(the checkpoint of step 2 is written)")) << err;
  EXPECT_TRUE(ReadTrainingCheckpoint(TrainingCheckpointPath(dir_, 2)).ok());
}

}  // namespace
}  // namespace kiln::nn
