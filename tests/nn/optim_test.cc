// Optimizers against their update rules computed by hand, schedules, and checkpoints
// (round trip, atomic writes, and every kind of damaged file).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/str_cat.h"

#include "backends/cpu/cpu_backend.h"
#include "nn/checkpoint.h"
#include "nn/linear.h"
#include "nn/optim.h"

namespace kiln::nn {
namespace {

using AD = Autodiff<Cpu>;
using T = Tensor<AD>;

// A one-parameter module for checking update rules: loss = sum(w * c).
class Scale : public Module<AD> {
 public:
  explicit Scale(std::vector<double> init) {
    add_parameter("w", T::from_vector(init, {static_cast<int64_t>(init.size())}));
  }
  T forward(const T& x) override { return param(0) * x; }
  std::unique_ptr<Module<AD>> clone() const override { return CloneAs<Scale>(); }
  std::vector<double> w() { return param(0).to_data().ToDoubles(); }
};

// Steps `opt` on loss = sum(w * c) (gradient c) `steps` times.
void RunSteps(Optimizer<Cpu>& opt, Scale& m, const std::vector<double>& c, int steps) {
  const T x = T::from_vector(c, {static_cast<int64_t>(c.size())});
  for (int i = 0; i < steps; ++i) opt.step(m, m(x).sum().backward());
}

TEST(Sgd, PlainMomentumNesterovAndWeightDecay) {
  {
    Scale m({1.0});
    Sgd<Cpu> opt(0.1);
    RunSteps(opt, m, {2.0}, 3);
    EXPECT_NEAR(m.w()[0], 1 - 3 * 0.1 * 2, 1e-12);
  }
  {  // v1 = 2, v2 = 0.9*2 + 2 = 3.8: w = 1 - 0.1 * (2 + 3.8)
    Scale m({1.0});
    Sgd<Cpu> opt(0.1, {.momentum = 0.9});
    RunSteps(opt, m, {2.0}, 2);
    EXPECT_NEAR(m.w()[0], 1 - 0.1 * (2 + 3.8), 1e-12);
  }
  {  // Nesterov steps along g + 0.9 v: 2 + 1.8 = 3.8, then 2 + 0.9 * 3.8 = 5.42
    Scale m({1.0});
    Sgd<Cpu> opt(0.1, {.momentum = 0.9, .nesterov = true});
    RunSteps(opt, m, {2.0}, 2);
    EXPECT_NEAR(m.w()[0], 1 - 0.1 * (3.8 + 5.42), 1e-12);
  }
  {  // weight decay adds wd * w to the gradient: g = 2 + 0.5 * 1
    Scale m({1.0});
    Sgd<Cpu> opt(0.1, {.weight_decay = 0.5});
    RunSteps(opt, m, {2.0}, 1);
    EXPECT_NEAR(m.w()[0], 1 - 0.1 * 2.5, 1e-12);
  }
  EXPECT_THROW(Sgd<Cpu>(0.1, {.nesterov = true}), Error);
  EXPECT_THROW(Sgd<Cpu>(-1), Error);
}

TEST(AdamW, MatchesTheReferenceUpdate) {
  Scale m({1.0, -2.0});
  AdamW<Cpu> opt(0.01, {.weight_decay = 0.1});
  const std::vector<double> c = {0.5, -3.0};
  RunSteps(opt, m, c, 5);
  for (size_t i = 0; i < c.size(); ++i) {
    double w = i == 0 ? 1.0 : -2.0, mom = 0, var = 0;
    for (int t = 1; t <= 5; ++t) {
      mom = 0.9 * mom + 0.1 * c[i];
      var = 0.999 * var + 0.001 * c[i] * c[i];
      w *= 1 - 0.01 * 0.1;
      w -= 0.01 * (mom / (1 - std::pow(0.9, t))) / (std::sqrt(var / (1 - std::pow(0.999, t))) + 1e-8);
    }
    EXPECT_NEAR(m.w()[i], w, 1e-12);
  }
  EXPECT_EQ(opt.steps(), 5);
}

// step_pieces on any pieces of a parameter (a sharded member's chunks) gives the same bits as
// the whole parameter's step, in f32, whatever the pieces' lengths and offsets: every element
// is computed alike (no approximate vector sqrt beside an exact scalar tail).
TEST(Optimizer, PiecesStepBitForBitLikeTheWhole) {
  using C = Tensor<Cpu>;
  Generator gen(4);
  const C p = C::uniform({1000}, -1, 1, gen);
  for (const auto& make : std::vector<std::function<std::unique_ptr<Optimizer<Cpu>>()>>{
           [] { return std::make_unique<AdamW<Cpu>>(0.01, AdamWOptions{.weight_decay = 0.1}); },
           [] { return std::make_unique<Sgd<Cpu>>(0.1, SgdOptions{.momentum = 0.9, .weight_decay = 0.1}); }}) {
    Scale whole_model({});
    *whole_model.named_parameters()[0].second = AsParameter(T::from_inner(p));  // f32
    auto whole = make();
    std::vector<C> values;
    const std::vector<int64_t> cuts = {0, 3, 10, 333, 334, 517, 1000};
    for (size_t i = 0; i + 1 < cuts.size(); ++i) values.push_back(p.slice(0, cuts[i], cuts[i + 1]));
    auto pieces = make();
    for (int step = 0; step < 3; ++step) {
      const C g = C::uniform({1000}, -1, 1, gen);
      Gradients<Cpu> grads;
      grads.set(whole_model.named_parameters()[0].second[0], g);
      whole->step(whole_model, grads);
      std::vector<C> grad_pieces;
      std::vector<std::string> paths;
      for (size_t i = 0; i + 1 < cuts.size(); ++i) {
        grad_pieces.push_back(g.slice(0, cuts[i], cuts[i + 1]));
        paths.push_back(absl::StrCat("w", i));  // each piece its own state
      }
      values = pieces->step_pieces(paths, values, grad_pieces);
    }
    ASSERT_EQ(whole_model.named_parameters()[0].second->dtype(), DType::kF32);
    EXPECT_EQ(C::cat(values, 0).to_data().ToDoubles(), whole_model.w()) << whole->name();
  }
}

// A step in parts (begin_pieces_step once, update_pieces on groups of pieces, as a sharded
// member updates bucket by bucket) counts one step and gives step_pieces' bits: AdamW's bias
// correction would differ if each group counted a step.
TEST(Optimizer, PiecesStepInGroupsCountsOneStep) {
  using C = Tensor<Cpu>;
  Generator gen(5);
  const C p = C::uniform({12}, -1, 1, gen);
  AdamW<Cpu> at_once(0.01), in_groups(0.01);
  std::vector<C> once = {p.slice(0, 0, 5), p.slice(0, 5, 12)}, groups = once;
  const std::vector<std::string> paths = {"a", "b"};
  for (int step = 0; step < 3; ++step) {
    const std::vector<C> g = {C::uniform({5}, -1, 1, gen), C::uniform({7}, -1, 1, gen)};
    once = at_once.step_pieces(paths, once, g);
    in_groups.begin_pieces_step();
    const C a = in_groups.update_pieces({paths[0]}, {groups[0]}, {g[0]})[0];
    const C b = in_groups.update_pieces({paths[1]}, {groups[1]}, {g[1]})[0];
    groups = {a, b};
  }
  EXPECT_EQ(in_groups.steps(), 3);
  EXPECT_EQ(C::cat(groups, 0).to_data().ToDoubles(), C::cat(once, 0).to_data().ToDoubles());
}

TEST(Optimizer, KeepsTheLeafSoHooksSurviveSteps) {
  Scale m({1.0});
  int fired = 0;
  m.named_parameters()[0].second->register_hook([&](const Tensor<Cpu>&) { ++fired; });
  Sgd<Cpu> opt(0.1);
  RunSteps(opt, m, {1.0}, 4);
  EXPECT_EQ(fired, 4);
}

std::string MessageOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.status().message());
  }
  return "no error";
}

TEST(Optimizer, StepsWithGivenGradientsWithoutABackwardPass) {
  Scale m({1.0, 2.0});
  int fired = 0;
  m.named_parameters()[0].second->register_hook([&](const Tensor<Cpu>&) { ++fired; });
  Gradients<Cpu> grads;
  grads.set(*m.named_parameters()[0].second, Tensor<Cpu>::from_vector(std::vector<double>{0.5, -1.0}, {2}));
  Sgd<Cpu>(0.1).step(m, grads);
  EXPECT_EQ(m.w(), (std::vector<double>{1.0 - 0.05, 2.0 + 0.1}));
  EXPECT_EQ(MessageOf([&] { grads.set(*m.named_parameters()[0].second, Tensor<Cpu>::zeros({3}, DType::kF64)); }),
            "Gradients::set: gradient f64[3] on cpu:0 does not match its leaf f64[2] on cpu:0");
  EXPECT_EQ(MessageOf([&] { grads.set(T::zeros({2}, DType::kF64), Tensor<Cpu>::zeros({2}, DType::kF64)); }),
            "Gradients::set: f64[2] on cpu:0 is no leaf that requires a gradient");
  // The leaf is the same, so its hook still fires on a real backward pass.
  RunSteps(*std::make_unique<Sgd<Cpu>>(0.1), m, {1.0, 1.0}, 1);
  EXPECT_EQ(fired, 1);
}

TEST(Module, LoadParametersByNameKeepsLeavesAndChecksEverything) {
  Generator gen(1);
  Linear<AD> fc(3, 2, gen);
  int fired = 0;
  fc.named_parameters()[0].second->register_hook([&](const Tensor<Cpu>&) { ++fired; });
  const T w = T::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const T b = T::from_vector(std::vector<float>{-1, 1}, {2});
  const auto before = fc.named_parameters()[1].second->to_data().ToDoubles();
  EXPECT_EQ(MessageOf([&] { fc.load_parameters({{"weight", w}}); }), "load_parameters: no value for parameter bias");
  EXPECT_EQ(MessageOf([&] {
              fc.load_parameters({{"weight", w}, {"bias", b}, {"gain", b}});
            }),
            "load_parameters: the module has no parameter gain");
  EXPECT_EQ(MessageOf([&] {
              fc.load_parameters({{"weight", b}, {"bias", b}});
            }),
            "load_parameters: weight is f32[2] on cpu:0, the parameter is f32[2,3] on cpu:0");
  // A failed load changed nothing.
  EXPECT_EQ(fc.named_parameters()[1].second->to_data().ToDoubles(), before);
  fc.load_parameters({{"bias", b}}, /*strict=*/false);
  EXPECT_EQ(fc.named_parameters()[1].second->to_data().ToDoubles(), (std::vector<double>{-1, 1}));
  fc.load_parameters({{"weight", w}, {"bias", b}});
  EXPECT_EQ(fc.weight().to_data().ToDoubles(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  (void)fc(T::ones({1, 3})).sum().backward();
  EXPECT_EQ(fired, 1);
}

TEST(Schedules, StepAndCosine) {
  const StepSchedule step{.base_lr = 1.0, .step_size = 10, .gamma = 0.5};
  EXPECT_EQ(step(0), 1.0);
  EXPECT_EQ(step(9), 1.0);
  EXPECT_EQ(step(10), 0.5);
  EXPECT_EQ(step(25), 0.25);
  const CosineSchedule cosine{.base_lr = 1.0, .total_steps = 100, .min_lr = 0.1};
  EXPECT_DOUBLE_EQ(cosine(0), 1.0);
  EXPECT_NEAR(cosine(50), 0.55, 1e-12);
  EXPECT_DOUBLE_EQ(cosine(100), 0.1);
  EXPECT_DOUBLE_EQ(cosine(200), 0.1);
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::path(::testing::TempDir()) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "model.safetensors").string();
  }
  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(CheckpointTest, RoundTripsParametersAndOptimizerState) {
  Generator gen(1);
  Linear<AD> a(3, 2, gen), b(3, 2, gen);
  AdamW<Cpu> opt_a(0.01), opt_b(0.01);
  const T x = T::uniform({4, 3}, -1, 1, gen);
  for (int i = 0; i < 3; ++i) opt_a.step(a, a(x).sum().backward());
  ASSERT_TRUE(SaveCheckpoint(path_, a, &opt_a).ok());
  ASSERT_TRUE(LoadCheckpoint(path_, b, &opt_b).ok());
  EXPECT_EQ(b(x).to_data().ToDoubles(), a(x).to_data().ToDoubles());
  EXPECT_EQ(opt_b.steps(), 3);
  // Training on from the checkpoint continues exactly as the original does.
  opt_a.step(a, a(x).sum().backward());
  opt_b.step(b, b(x).sum().backward());
  EXPECT_EQ(b(x).to_data().ToDoubles(), a(x).to_data().ToDoubles());
  // No temporary file is left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST_F(CheckpointTest, WritesPlainSafetensors) {
  TensorFile file;
  file.tensors.emplace("w", TensorData::FromVector(std::vector<float>{1, 2, 3}, {3}));
  file.tensors.emplace("n", TensorData::FromVector(std::vector<int64_t>{7}, {1}));
  file.metadata["note"] = "hi";
  ASSERT_TRUE(WriteSafetensors(path_, file).ok());
  std::ifstream in(path_, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  const std::string header = bytes.substr(8, n);
  EXPECT_NE(header.find(R"("w":{"data_offsets":[8,20],"dtype":"F32","shape":[3]})"), std::string::npos) << header;
  EXPECT_NE(header.find(R"("__metadata__":{"note":"hi"})"), std::string::npos) << header;
  EXPECT_EQ(bytes.size(), 8 + n + 8 + 12);
  auto back = ReadSafetensors(path_);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tensors.at("w").ToDoubles(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(back->metadata.at("note"), "hi");
}

TEST_F(CheckpointTest, DamagedFilesAreRejectedClearly) {
  Generator gen(2);
  Linear<AD> model(3, 2, gen);
  ASSERT_TRUE(SaveCheckpoint(path_, model).ok());
  std::ifstream in(path_, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& bytes) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << bytes;
  };
  auto load_error = [&] { return LoadCheckpoint<Cpu>(path_, model); };

  write(good.substr(0, good.size() - 4));  // truncated data
  absl::Status s = load_error();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("(truncated?)"), std::string_view::npos) << s;

  write(good.substr(0, 5));
  EXPECT_EQ(load_error().message(), path_ + " is not a valid safetensors file: only 5 bytes, no header length");

  std::string huge = good;
  huge[7] = '\x7f';
  write(huge);
  EXPECT_EQ(load_error().code(), absl::StatusCode::kDataLoss);

  std::string garbled = good;
  garbled[8] = '[';
  garbled[9] = '!';
  write(garbled);
  s = load_error();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("header is not JSON"), std::string_view::npos) << s;

  // A checkpoint of another model: wrong shape, then a missing parameter.
  Linear<AD> wider(4, 2, gen);
  ASSERT_TRUE(SaveCheckpoint(path_, wider).ok());
  EXPECT_EQ(load_error().message(),
            path_ + ": parameter weight is f32[2,4] in the file but f32[2,3] on cpu:0 in the model");
  TensorFile partial;
  partial.tensors.emplace("weight", model.weight().to_data());
  ASSERT_TRUE(WriteSafetensors(path_, partial).ok());
  EXPECT_EQ(load_error().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(load_error().message(), path_ + " has no tensor for parameter bias");

  // A file without optimizer state cannot restore an optimizer.
  ASSERT_TRUE(SaveCheckpoint(path_, model).ok());
  Sgd<Cpu> sgd(0.1);
  EXPECT_EQ(LoadCheckpoint<Cpu>(path_, model, &sgd).message(), path_ + " holds no state for optimizer sgd");

  EXPECT_EQ(LoadCheckpoint<Cpu>((dir_ / "missing").string(), model).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(SaveCheckpoint<Cpu>((dir_ / "no/such/dir/x").string(), model).code(), absl::StatusCode::kNotFound);
}

TEST_F(CheckpointTest, AFailedLoadChangesNothing) {
  Generator gen(3);
  Linear<AD> model(3, 2, gen), other(3, 2, gen);
  const auto before = model.weight().to_data().ToDoubles();
  TensorFile file;
  file.tensors.emplace("weight", other.weight().to_data());
  file.tensors.emplace("bias", TensorData::FromVector(std::vector<float>{1, 2, 3}, {3}));
  ASSERT_TRUE(WriteSafetensors(path_, file).ok());
  EXPECT_FALSE(LoadCheckpoint<Cpu>(path_, model).ok());
  EXPECT_EQ(model.weight().to_data().ToDoubles(), before);
}

// Rewrites the file at `path` after `edit` changes it.
void EditFile(const std::string& path, const std::function<void(TensorFile&)>& edit) {
  absl::StatusOr<TensorFile> file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  edit(*file);
  ASSERT_TRUE(WriteSafetensors(path, *file).ok());
}

// Optimizer state that does not fit its parameter loaded "OK" and failed (or misbehaved) at the
// next step; now it is refused at the load, and nothing changes.
TEST_F(CheckpointTest, OptimizerStateMustFitItsSlotAndParameter) {
  Generator gen(4);
  Linear<AD> model(3, 2, gen);
  const T x = T::uniform({4, 3}, -1, 1, gen);
  Sgd<Cpu> saved(0.1, {.momentum = 0.9});
  saved.step(model, model(x).sum().backward());
  ASSERT_TRUE(SaveCheckpoint(path_, model, &saved).ok());
  const std::string good = path_ + ".good";
  std::filesystem::copy_file(path_, good);

  struct Case {
    std::function<void(TensorFile&)> edit;
    std::string error;
  };
  const TensorData f32_1 = TensorData::FromVector(std::vector<float>{1}, {1});
  const TensorData f64_2x3 = TensorData(Shape({2, 3}), DType::kF64);
  const TensorData f32_2x3 = TensorData(Shape({2, 3}), DType::kF32);
  const Case cases[] = {
      {[&](TensorFile& f) { f.tensors.at("optimizer/momentum/weight") = f32_1; },
       ": optimizer state optimizer/momentum/weight is f32[1] in the file but must be f32[2,3] like "
       "parameter weight"},
      {[&](TensorFile& f) { f.tensors.at("optimizer/momentum/weight") = f64_2x3; },
       ": optimizer state optimizer/momentum/weight is f64[2,3] in the file but must be f32[2,3] like "
       "parameter weight"},
      {[&](TensorFile& f) { f.tensors.emplace("optimizer/velocity/weight", f32_2x3); },
       " has tensor optimizer/velocity/weight, which is no state of sgd (its slots: momentum)"},
      {[&](TensorFile& f) { f.tensors.emplace("optimizer/momentum", f32_2x3); },
       " has tensor optimizer/momentum, which is no state of sgd (its slots: momentum)"},
      {[&](TensorFile& f) { f.tensors.emplace("optimizer/momentum/fc.weight", f32_2x3); },
       " has tensor optimizer/momentum/fc.weight, but the model has no parameter fc.weight"},
      {[&](TensorFile& f) { f.metadata["optimizer.steps"] = "9223372036854775807"; },
       R"(: optimizer.steps is "9223372036854775807", not a whole number from 0 to 2^53)"},
      {[&](TensorFile& f) { f.metadata["optimizer.steps"] = "9007199254740993"; },
       R"(: optimizer.steps is "9007199254740993", not a whole number from 0 to 2^53)"},
      {[&](TensorFile& f) { f.metadata["optimizer.steps"] = "-1"; },
       R"(: optimizer.steps is "-1", not a whole number from 0 to 2^53)"},
      {[&](TensorFile& f) { f.metadata["optimizer.steps"] = " 1"; },
       R"(: optimizer.steps is " 1", not a whole number from 0 to 2^53)"},
      {[&](TensorFile& f) { f.metadata["optimizer.steps"] = "+1"; },
       R"(: optimizer.steps is "+1", not a whole number from 0 to 2^53)"},
      {[&](TensorFile& f) { f.metadata.erase("optimizer.steps"); },
       ": optimizer.steps is missing, not a whole number from 0 to 2^53"},
  };
  for (const Case& c : cases) {
    std::filesystem::copy_file(good, path_, std::filesystem::copy_options::overwrite_existing);
    EditFile(path_, c.edit);
    Linear<AD> fresh(3, 2, gen);
    const auto weights = fresh.weight().to_data().ToDoubles();
    Sgd<Cpu> sgd(0.1, {.momentum = 0.9});
    const absl::Status s = LoadCheckpoint<Cpu>(path_, fresh, &sgd);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(s.message(), path_ + c.error);
    EXPECT_EQ(fresh.weight().to_data().ToDoubles(), weights);  // nothing changed
    EXPECT_EQ(sgd.steps(), 0);
    EXPECT_TRUE(sgd.state().empty());
  }

  // SGD without momentum keeps no state, so momentum in the file is not its state.
  std::filesystem::copy_file(good, path_, std::filesystem::copy_options::overwrite_existing);
  Sgd<Cpu> plain(0.1);
  EXPECT_EQ(LoadCheckpoint<Cpu>(path_, model, &plain).message(),
            path_ + " has tensor optimizer/momentum/bias, which is no state of sgd (its slots: none)");
  // The untouched file loads, and training goes on.
  Sgd<Cpu> sgd(0.1, {.momentum = 0.9});
  ASSERT_TRUE(LoadCheckpoint<Cpu>(path_, model, &sgd).ok());
  EXPECT_EQ(sgd.steps(), 1);
  sgd.step(model, model(x).sum().backward());
  EXPECT_EQ(sgd.steps(), 2);
}

TEST_F(CheckpointTest, AdamWNeedsAllItsSlotsOrNone) {
  Generator gen(5);
  Linear<AD> model(3, 2, gen);
  AdamW<Cpu> saved(0.01);
  saved.step(model, model(T::uniform({4, 3}, -1, 1, gen)).sum().backward());
  ASSERT_TRUE(SaveCheckpoint(path_, model, &saved).ok());
  EditFile(path_, [](TensorFile& f) { f.tensors.erase("optimizer/exp_avg_sq/weight"); });
  AdamW<Cpu> adamw(0.01);
  EXPECT_EQ(LoadCheckpoint<Cpu>(path_, model, &adamw).message(),
            path_ +
                ": parameter weight has 1 of the 2 optimizer slots (exp_avg, exp_avg_sq) in the "
                "file; it needs all of them or none");
  // None at all is a fresh start for that parameter.
  EditFile(path_, [](TensorFile& f) { f.tensors.erase("optimizer/exp_avg/weight"); });
  EXPECT_TRUE(LoadCheckpoint<Cpu>(path_, model, &adamw).ok());
  EXPECT_EQ(adamw.state().size(), 2u);  // the bias's two slots
}

// The step count is bounded where a double still counts exactly; at the bound a step is an
// error, never an overflow.
TEST_F(CheckpointTest, StepCountsStopAtTheirBound) {
  Generator gen(6);
  Linear<AD> model(3, 2, gen);
  AdamW<Cpu> saved(0.01);
  ASSERT_TRUE(SaveCheckpoint(path_, model, &saved).ok());
  EditFile(path_, [](TensorFile& f) { f.metadata["optimizer.steps"] = "9007199254740992"; });
  AdamW<Cpu> adamw(0.01);
  ASSERT_TRUE(LoadCheckpoint<Cpu>(path_, model, &adamw).ok());
  EXPECT_EQ(adamw.steps(), kMaxOptimizerSteps);
  const auto weights = model.weight().to_data().ToDoubles();
  const auto grads = model(T::uniform({4, 3}, -1, 1, gen)).sum().backward();
  try {
    adamw.step(model, grads);
    ADD_FAILURE() << "a step past 2^53 steps did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kOutOfRange);
    EXPECT_EQ(e.status().message(), "optimizer adamw: already 9007199254740992 steps, the most it counts");
  }
  EXPECT_EQ(adamw.steps(), kMaxOptimizerSteps);
  EXPECT_EQ(model.weight().to_data().ToDoubles(), weights);
  EXPECT_THROW(adamw.load_state({}, -1), Error);
  EXPECT_THROW(adamw.load_state({}, kMaxOptimizerSteps + 1), Error);
}

}  // namespace
// Parameter groups: the decay applies only where the predicate says so.
TEST(AdamW, WeightDecayFollowsTheParameterGroups) {
  EXPECT_TRUE(DecayOnlyMatrices("h.0.mlp.fc.weight"));
  EXPECT_FALSE(DecayOnlyMatrices("h.0.mlp.fc.bias"));
  EXPECT_FALSE(DecayOnlyMatrices("h.0.ln_1.weight"));
  EXPECT_FALSE(DecayOnlyMatrices("wte.weight"));
  Generator gen(3);
  Linear<Autodiff<Cpu>> layer(2, 2, gen, {.dtype = DType::kF64});
  const Tensor<Autodiff<Cpu>> x = Tensor<Autodiff<Cpu>>::ones({1, 2}, DType::kF64);
  // A zero gradient isolates the decay: Adam's step is 0, decay shrinks by lr * wd.
  auto grads = (layer(x) * 0).sum().backward();
  const auto w0 = layer.weight().to_data().ToDoubles();
  AdamW<Cpu> opt(0.1, {.weight_decay = 0.5, .decays = [](const std::string& path) { return path == "bias"; }});
  opt.step(layer, grads);
  EXPECT_EQ(layer.weight().to_data().ToDoubles(), w0);  // not in the decayed group
}

}  // namespace kiln::nn
