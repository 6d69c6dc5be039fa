// Training checkpoint folders: written whole or not at all, the newest complete one found
// past what interrupted writes leave, old ones pruned, the same step replaced, and a module,
// its optimizer and its random streams restored exactly (all or nothing).
#include "nn/training_checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

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
  const auto checkpoint = SnapshotTraining(*a, sgd_a, {{"note", "x"}});
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

TEST_F(TrainingCheckpointTest, LatestSkipsInterruptedWritesAndPruneKeepsTheNewest) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1);
  for (int64_t step : {5, 30, 200})
    ASSERT_TRUE(WriteTrainingCheckpoint(dir_, step, SnapshotTraining(*m, sgd, {})).ok());
  // What a killed writer leaves, a stray file and a link named like a checkpoint: not complete ones.
  fs::create_directories(dir_ + "/.writing-step-300-abcdef");
  std::ofstream(dir_ + "/step-000000000999") << "not a folder";
  fs::create_directory_symlink(TrainingCheckpointPath(dir_, 5), dir_ + "/step-000000000998");
  auto latest = LatestTrainingCheckpoint(dir_);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, TrainingCheckpointPath(dir_, 200));
  ASSERT_TRUE(PruneTrainingCheckpoints(dir_, 2).ok());
  EXPECT_EQ(Entries(dir_), std::set<std::string>(
                               {"step-000000000030", "step-000000000200", "step-000000000999", "step-000000000998"}));
  EXPECT_EQ(LatestTrainingCheckpoint(dir_ + "/none").status().code(), absl::StatusCode::kNotFound);
  fs::create_directories(dir_ + "/empty");
  EXPECT_EQ(LatestTrainingCheckpoint(dir_ + "/empty").status().message(),
            "no complete checkpoint (step-N folder) in " + dir_ + "/empty");
}

TEST_F(TrainingCheckpointTest, TheSameStepIsReplacedWhole) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1);
  ASSERT_TRUE(WriteTrainingCheckpoint(dir_, 4, SnapshotTraining(*m, sgd, {{"try", "1"}})).ok());
  ASSERT_TRUE(WriteTrainingCheckpoint(dir_, 4, SnapshotTraining(*m, sgd, {{"try", "2"}})).ok());
  EXPECT_EQ(Entries(dir_), std::set<std::string>({"step-000000000004"}));
  EXPECT_EQ(ReadTrainingCheckpoint(TrainingCheckpointPath(dir_, 4))->state.metadata.at("try"), "2");
}

TEST_F(TrainingCheckpointTest, RefusesWhatIsNotACompleteCheckpoint) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1);
  ASSERT_TRUE(WriteTrainingCheckpoint(dir_, 1, SnapshotTraining(*m, sgd, {})).ok());
  const std::string c = TrainingCheckpointPath(dir_, 1);
  EXPECT_EQ(ReadTrainingCheckpoint(c + "/model.safetensors").status().message(),
            c + "/model.safetensors is not a checkpoint folder (one with model.safetensors and "
                "training_state.safetensors, as --checkpoint_dir writes)");
  fs::remove(c + "/training_state.safetensors");
  EXPECT_EQ(ReadTrainingCheckpoint(c).status().code(), absl::StatusCode::kNotFound);
  // A state file of another format (here: a plain parameters file).
  fs::copy_file(c + "/model.safetensors", c + "/training_state.safetensors");
  EXPECT_EQ(ReadTrainingCheckpoint(c).status().message(),
            c + "/training_state.safetensors is not a kiln training state (format pt, expected kiln-training-state/1)");
  // A checkpoint of another model changes nothing.
  ASSERT_TRUE(WriteTrainingCheckpoint(dir_, 2, SnapshotTraining(*m, sgd, {})).ok());
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

TEST_F(TrainingCheckpointTest, TheWriterWritesInOrderOffTheCallingThread) {
  auto m = Model(1);
  Sgd<Cpu> sgd(0.1);
  {
    CheckpointWriter writer(dir_, 2);
    for (int64_t step = 1; step <= 5; ++step) ASSERT_TRUE(writer.Write(step, SnapshotTraining(*m, sgd, {})).ok());
    ASSERT_TRUE(writer.Flush().ok());
    EXPECT_EQ(Entries(dir_), std::set<std::string>({"step-000000000004", "step-000000000005"}));
  }
  std::ofstream(dir_ + "/blocker") << "x";
  CheckpointWriter failing(dir_ + "/blocker", 2);  // a file where the folder should be
  ASSERT_TRUE(failing.Write(1, SnapshotTraining(*m, sgd, {})).ok());
  EXPECT_FALSE(failing.Flush().ok());
  EXPECT_FALSE(failing.Write(2, SnapshotTraining(*m, sgd, {})).ok());  // the failure sticks
}

}  // namespace
}  // namespace kiln::nn
