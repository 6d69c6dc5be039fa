// Sharded data parallelism (ZeRO-1/2/3), on every backend with collective kernels: each stage
// trains to the bit what unsharded data parallelism (DDP) trains, on the same group, while each
// member keeps only its chunk of the optimizer state and of the gradients; clipping agrees to
// roundoff; loss-scale overflows skip everywhere; the optimizer state moves between stages and
// world sizes through its full (checkpoint) form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"

#include "distributed/data_parallel.h"
#include "nn/activation.h"
#include "nn/gpt.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"
#include "tests/backends.h"

namespace kiln::distributed {
namespace {

using ::kiln::testing::ConfigNames;
using ::kiln::testing::DistributedBackends;
using ::kiln::testing::TestDevices;

// Linear(4, 8), GELU, Linear(8, 3): sizes 32, 8, 24 and 3, so 3 and 4 members split some
// unevenly and 4 members outnumber the last bias. Plus a parameter no step uses.
template <class B>
class Net : public nn::Module<Autodiff<B>> {
 public:
  using AD = Tensor<Autodiff<B>>;
  Net(Generator& gen, const typename B::Device& device) {
    auto seq = std::make_unique<nn::Sequential<Autodiff<B>>>();
    seq->template add<nn::Linear<Autodiff<B>>>(4, 8, gen, nn::LinearOptions{.dtype = DType::kF64}, device)
        .template add<nn::GELU<Autodiff<B>>>()
        .template add<nn::Linear<Autodiff<B>>>(8, 3, gen, nn::LinearOptions{.dtype = DType::kF64}, device);
    this->add_child("layers", std::move(seq));
    this->add_parameter("unused", AD::uniform({5}, -1, 1, gen, DType::kF64, device));
  }
  AD forward(const AD& x) override { return this->child(0)(x); }
  std::unique_ptr<nn::Module<Autodiff<B>>> clone() const override { return this->template CloneAs<Net>(); }
};

template <class B>
std::vector<double> Flat(nn::Module<Autodiff<B>>& m) {
  std::vector<double> out;
  for (auto& [name, p] : m.named_parameters()) {
    for (double v : p->to_data().ToDoubles()) out.push_back(v);
  }
  return out;
}

// The parameters of member r's replica, whole (ZeRO-3 gathers them first: a collective).
template <class B>
std::vector<double> Params(DataParallel<B>& dp, int r = 0) {
  const absl::Status gathered = dp.GatherParameters();
  EXPECT_TRUE(gathered.ok()) << gathered;
  return Flat<B>(dp.replica(r));
}

template <class B>
Tensor<Autodiff<B>> Loss(nn::Module<Autodiff<B>>& m, const Tensor<Autodiff<B>>& x, const Tensor<Autodiff<B>>& y) {
  return nn::CrossEntropy(m(x), y);
}

// AdamW with weight decay on matrices only: per-parameter settings must follow the chunks.
template <class B>
std::unique_ptr<nn::Optimizer<B>> MakeAdamW() {
  return std::make_unique<nn::AdamW<B>>(0.01, nn::AdamWOptions{.weight_decay = 0.1, .decays = nn::DecayOnlyMatrices});
}

template <class B>
std::unique_ptr<DataParallel<B>> Make(nn::Module<Autodiff<B>>& model, int devices, Sharding sharding,
                                      int64_t bucket_bytes = 200, std::optional<DType> reduce_dtype = std::nullopt) {
  // The first `devices` of 4: asking for fewer could drop devices an older group still uses.
  auto d = TestDevices<B>::Provide(4);
  d.resize(devices);
  auto dp = DataParallel<B>::Create(model, std::make_shared<DeviceGroup<Autodiff<B>>>(d), MakeAdamW<B>,
                                    {.bucket_bytes = bucket_bytes, .reduce_dtype = reduce_dtype, .sharding = sharding});
  EXPECT_TRUE(dp.ok()) << dp.status();
  return dp.ok() ? *std::move(dp) : nullptr;
}

template <class B>
void Train(DataParallel<B>& dp, int first_step, int steps) {
  const auto device = dp.group().devices()[0];
  for (int step = first_step; step < first_step + steps; ++step) {
    Generator data(50 + step);
    const auto x = Tensor<B>::uniform({12, 4}, -2, 2, data, DType::kF64, device);
    const auto y = Tensor<B>::uniform({12}, 0, 3, data, DType::kF64, device).to(DType::kI64);
    auto loss = dp.Step(x, y, Loss<B>);
    ASSERT_TRUE(loss.ok()) << loss.status();
  }
}

// Every element an optimizer state slot holds on member r.
template <class B>
int64_t StateElements(DataParallel<B>& dp, int r) {
  int64_t n = 0;
  for (const auto& [key, t] : dp.optimizer(r).state()) n += t.numel();
  return n;
}

template <class B>
class ShardedDataParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_IF_UNAVAILABLE(B);
    KILN_SKIP_IF_FEWER_DEVICES(B, ::kiln::testing::kDistributedDevices);
  }
};
TYPED_TEST_SUITE(ShardedDataParallelTest, DistributedBackends, ConfigNames);

// Bit-identical to DDP at every step, for both stages, over 2, 3 and 4 members; every replica
// identical; each member's optimizer state is its chunks (ceil(n / N) per parameter and slot).
TYPED_TEST(ShardedDataParallelTest, EveryStageEqualsDdpToTheBit) {
  using B = TypeParam;
  for (int devices : {2, 3, 4}) {
    const auto d = TestDevices<B>::Provide(devices);
    Generator gen(5);
    Net<B> model(gen, d[0]);
    for (Sharding stage : {Sharding::kOptimizer, Sharding::kGradients, Sharding::kParameters}) {
      SCOPED_TRACE(::testing::Message() << devices << " devices, sharding " << ShardingName(stage));
      auto sharded = Make<B>(model, devices, stage);
      ASSERT_NE(sharded, nullptr);
      auto reference = Make<B>(model, devices, Sharding::kNone);
      for (int step = 0; step < 4; ++step) {
        Train(*reference, step, 1);
        Train(*sharded, step, 1);
        ASSERT_EQ(Params(*sharded), Flat<B>(reference->replica(0))) << "step " << step;
        for (int r = 1; r < devices; ++r) ASSERT_EQ(Flat<B>(sharded->replica(r)), Flat<B>(sharded->replica(0)));
      }
      int64_t chunks = 0;
      for (auto& [name, p] : model.named_parameters()) chunks += ChunkSize(p->numel(), devices);
      for (int r = 0; r < devices; ++r) EXPECT_EQ(StateElements(*sharded, r), 2 * chunks) << "member " << r;
      EXPECT_EQ(StateElements(*reference, 0), 2 * model.parameter_count());
    }
  }
}

// Clipping by the global norm over every member's chunks: the norm is summed in another order
// than DDP's, so the factor (and so the parameters) agree to roundoff, not to the bit.
TYPED_TEST(ShardedDataParallelTest, ClipsByTheGlobalNormOverAllChunks) {
  using B = TypeParam;
  const auto d = TestDevices<B>::Provide(3);
  Generator gen(6);
  Net<B> model(gen, d[0]);
  for (Sharding stage : {Sharding::kGradients, Sharding::kParameters}) {
    SCOPED_TRACE(ShardingName(stage));
    auto reference = Make<B>(model, 3, Sharding::kNone);
    auto sharded = Make<B>(model, 3, stage);
    reference->set_clip_grad_norm(0.05);
    sharded->set_clip_grad_norm(0.05);
    auto unclipped = Make<B>(model, 3, stage);
    for (int step = 0; step < 4; ++step) {
      Train(*reference, step, 1);
      Train(*sharded, step, 1);
      Train(*unclipped, step, 1);
      const auto want = Flat<B>(reference->replica(0)), got = Params(*sharded);
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-13 * (1 + std::abs(want[i])));
    }
    EXPECT_NE(Params(*unclipped), Params(*sharded)) << "clipping must be active here";
  }
}

// A loss-scale overflow on one member's batch shard skips the update on every member, and the
// scaled sharded run otherwise equals the unscaled DDP run to the bit.
TYPED_TEST(ShardedDataParallelTest, LossScaleOverflowSkipsTheStepOnEveryMember) {
  using B = TypeParam;
  using AD = Tensor<Autodiff<B>>;
  const auto d = TestDevices<B>::Provide(2);
  Generator gen(8);
  Net<B> model(gen, d[0]);
  for (Sharding stage : {Sharding::kGradients, Sharding::kParameters}) {
    SCOPED_TRACE(ShardingName(stage));
    auto plain = Make<B>(model, 2, Sharding::kNone);
    auto scaled = Make<B>(model, 2, stage);
    scaled->set_loss_scaler(nn::LossScalerOptions{.init_scale = 1024, .growth_interval = 2});
    int step = 0;
    const auto loss = [&](nn::Module<Autodiff<B>>& m, const AD& x, const AD& y) {
      const AD l = Loss<B>(m, x, y);
      return step == 2 && x.device() == d[1] ? l * INFINITY : l;
    };
    for (step = 0; step < 5; ++step) {
      Generator data(70 + step);
      const auto x = Tensor<B>::uniform({8, 4}, -2, 2, data, DType::kF64, d[0]);
      const auto y = Tensor<B>::uniform({8}, 0, 3, data, DType::kF64, d[0]).to(DType::kI64);
      const auto before = Params(*scaled);
      ASSERT_TRUE(scaled->Step(x, y, loss).ok());
      EXPECT_EQ(scaled->last_step_skipped(), step == 2);
      const auto second = Params(*scaled, 1);
      EXPECT_EQ(second, Flat<B>(scaled->replica(0)));
      if (step == 2) {
        EXPECT_EQ(Params(*scaled), before);
        continue;
      }
      ASSERT_TRUE(plain->Step(x, y, Loss<B>).ok());
      EXPECT_EQ(Params(*scaled), Flat<B>(plain->replica(0))) << "step " << step;
    }
    EXPECT_EQ(scaled->loss_scaler()->skipped_steps(), 1);
  }
}

// The full optimizer (a checkpoint's form) of a sharded run is DDP's, and loaded into a run of
// another stage and world size it continues exactly as DDP continues.
TYPED_TEST(ShardedDataParallelTest, OptimizerStateMovesBetweenStagesAndWorldSizes) {
  using B = TypeParam;
  const auto d = TestDevices<B>::Provide(4);
  Generator gen(9);
  Net<B> model(gen, d[0]);
  auto reference = Make<B>(model, 4, Sharding::kNone);
  auto sharded = Make<B>(model, 4, Sharding::kGradients);
  Train(*reference, 0, 3);
  Train(*sharded, 0, 3);
  auto full = sharded->FullOptimizer();
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ((*full)->steps(), 3);
  const auto& want = reference->optimizer(0).state();
  ASSERT_EQ((*full)->state().size(), want.size());
  for (const auto& [key, t] : want) {
    ASSERT_TRUE((*full)->state().contains(key)) << key;
    EXPECT_EQ((*full)->state().at(key).to_data().ToDoubles(), t.to_data().ToDoubles()) << key;
  }
  // 4 members ZeRO-2 -> 3 members ZeRO-1 -> 2 members DDP, each from the last one's state.
  nn::Module<Autodiff<B>>* from = &sharded->replica(0);
  std::shared_ptr<const nn::Optimizer<B>> state = *full;
  int step = 3;
  for (auto [devices, stage] : {std::pair{3, Sharding::kOptimizer}, std::pair{2, Sharding::kNone}}) {
    auto next = Make<B>(*from, devices, stage);
    next->LoadFullOptimizer(*state);
    Train(*next, step, 2);
    Train(*reference, step, 2);
    step += 2;
    const auto got = Flat<B>(next->replica(0)), expected = Flat<B>(reference->replica(0));
    // Another world size sums the batch in other shards: equal to roundoff.
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], 1e-12 * (1 + std::abs(expected[i])));
    auto again = next->FullOptimizer();
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ((*again)->steps(), step);
    state = *again;
    from = &next->replica(0);
    sharded = std::move(next);  // keeps `from` alive
  }
}

// Buckets reduced in bf16 (half the bytes): each member rounds its packed bucket, the
// reduction accumulates in f32 and rounds once, as unsharded, so still DDP's bits.
TYPED_TEST(ShardedDataParallelTest, Bf16ReductionEqualsDdpsToTheBit) {
  using B = TypeParam;
  const auto d = TestDevices<B>::Provide(3);
  Generator gen(11);
  Net<B> model(gen, d[0]);
  auto reference = Make<B>(model, 3, Sharding::kNone, 200, DType::kBF16);
  auto sharded = Make<B>(model, 3, Sharding::kGradients, 200, DType::kBF16);
  auto exact = Make<B>(model, 3, Sharding::kGradients);
  Train(*reference, 0, 3);
  Train(*sharded, 0, 3);
  Train(*exact, 0, 3);
  EXPECT_EQ(Flat<B>(sharded->replica(0)), Flat<B>(reference->replica(0)));
  EXPECT_NE(Flat<B>(exact->replica(0)), Flat<B>(sharded->replica(0))) << "bf16 must have rounded something";
}

// The flight recorder sees the sharded collectives: each bucket's reduce-scatter, tagged with
// its step, and the all-gathers of the updated parameters.
TYPED_TEST(ShardedDataParallelTest, TheFlightRecorderSeesReduceScattersAndAllGathers) {
  using B = TypeParam;
  const auto d = TestDevices<B>::Provide(2);
  Generator gen(12);
  Net<B> model(gen, d[0]);
  auto dp = Make<B>(model, 2, Sharding::kGradients);
  Train(*dp, 0, 1);
  int scatters = 0, gathers = 0;
  for (const FlightDumpEntry& e : dp->group().inner().flight_recorder().Snapshot(false).entries) {
    EXPECT_EQ(e.state, "completed") << e.op << " " << e.tag;
    if (e.op == "reduce_scatter(mean)" && absl::StartsWith(e.tag, "step 0 bucket ")) ++scatters;
    if (e.op == "all_gather" && absl::StartsWith(e.tag, "gather parameters bucket ")) ++gathers;
  }
  const int buckets = dp->sync(0).bucket_count();
  EXPECT_GT(buckets, 1);
  EXPECT_EQ(scatters, 2 * buckets);  // per member
  EXPECT_EQ(gathers, 2 * buckets);
}

// ZeRO-3: between steps a replica's parameters are placeholders (one NaN each, expanded to
// the parameter's shape): the member holds only its chunks.
TYPED_TEST(ShardedDataParallelTest, ParametersLiveAsChunksBetweenSteps) {
  using B = TypeParam;
  const auto d = TestDevices<B>::Provide(3);
  Generator gen(13);
  Net<B> model(gen, d[0]);
  auto dp = Make<B>(model, 3, Sharding::kParameters);
  for (int when = 0; when < 2; ++when) {  // after Create, then after a step
    for (int r = 0; r < 3; ++r) {
      for (double v : Flat<B>(dp->replica(r))) ASSERT_TRUE(std::isnan(v)) << "member " << r;
    }
    Train(*dp, 0, 1);
  }
  EXPECT_FALSE(std::isnan(Params(*dp, 2)[0]));
}

// A GPT (tied embedding used outside its unit, dropout in every block) under every mix of
// ZeRO-3's options equals DDP to the bit: the recomputed forwards draw the same masks.
TYPED_TEST(ShardedDataParallelTest, GptUnderEveryUnitScheduleEqualsDdpToTheBit) {
  using B = TypeParam;
  using ADB = Autodiff<B>;
  const auto d = TestDevices<B>::Provide(3);
  Generator gen(14);
  nn::Gpt<ADB> model(
      {.vocab = 11, .context = 6, .layers = 3, .heads = 2, .width = 8, .dropout = 0.2, .dtype = DType::kF64}, gen,
      d[0]);
  const auto loss = [](nn::Module<ADB>& m, const Tensor<ADB>& x, const Tensor<ADB>& y) {
    const Tensor<ADB> logits = m(x);
    return nn::functional::cross_entropy(logits.reshape({-1, logits.size(2)}), y.reshape({-1}));
  };
  auto group = std::make_shared<DeviceGroup<ADB>>(d);
  auto reference = DataParallel<B>::Create(model, group, MakeAdamW<B>, {.bucket_bytes = 2000});
  ASSERT_TRUE(reference.ok());
  std::vector<std::unique_ptr<DataParallel<B>>> runs;
  for (bool reshard : {true, false}) {
    for (bool prefetch : {true, false}) {
      auto dp = DataParallel<B>::Create(model, group, MakeAdamW<B>,
                                        {.bucket_bytes = 2000,
                                         .sharding = Sharding::kParameters,
                                         .parameters = {.reshard_after_forward = reshard, .prefetch = prefetch}});
      ASSERT_TRUE(dp.ok()) << dp.status();
      runs.push_back(*std::move(dp));
    }
  }
  for (int step = 0; step < 3; ++step) {
    Generator data(80 + step);
    const auto x = Tensor<B>::uniform({6, 6}, 0, 11, data, DType::kF64, d[0]).to(DType::kI64);
    const auto y = Tensor<B>::uniform({6, 6}, 0, 11, data, DType::kF64, d[0]).to(DType::kI64);
    const auto want = (*reference)->Step(x, y, loss);
    ASSERT_TRUE(want.ok()) << want.status();
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto got = runs[i]->Step(x, y, loss);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, *want) << "run " << i << " step " << step;
      ASSERT_EQ(Params(*runs[i], 1), Flat<B>((*reference)->replica(1))) << "run " << i << " step " << step;
    }
  }
}

// Each unit's gather is a collective the flight recorder sees: the root and every unit before
// forward, and, freed after forward, every unit again for backward but the last (kept whole
// with prefetch, since backward needs it first).
TYPED_TEST(ShardedDataParallelTest, TheFlightRecorderSeesEachUnitsGathers) {
  using B = TypeParam;
  const auto d = TestDevices<B>::Provide(2);
  Generator gen(15);
  Net<B> model(gen, d[0]);
  for (bool reshard : {true, false}) {
    auto dp = DataParallel<B>::Create(
        model, std::make_shared<DeviceGroup<Autodiff<B>>>(d), MakeAdamW<B>,
        {.sharding = Sharding::kParameters, .parameters = {.reshard_after_forward = reshard, .prefetch = true}});
    ASSERT_TRUE(dp.ok());
    Train(**dp, 0, 1);
    std::vector<std::string> tags;
    for (const FlightDumpEntry& e : (*dp)->group().inner().flight_recorder().Snapshot(false).entries) {
      if (e.op == "all_gather" && absl::StartsWith(e.tag, "gather unit ")) tags.push_back(e.tag);
    }
    // Per member: the two Linear layers are the units; the unused parameter is the root.
    const std::vector<std::string> forward = {"gather unit root", "gather unit 0", "gather unit 1"};
    std::vector<std::string> want;
    for (const auto& t : forward) want.insert(want.end(), 2, t);
    if (reshard) want.insert(want.end(), 2, "gather unit 0");
    std::sort(tags.begin(), tags.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(tags, want) << "reshard_after_forward " << reshard;
  }
}

// After GatherParameters a replica evaluates on its own (no collective: the test thread runs
// it, not the members), as DDP's does; the next step frees the parameters again.
TYPED_TEST(ShardedDataParallelTest, GatheredReplicasEvaluateAloneUntilTheNextStep) {
  using B = TypeParam;
  const auto d = TestDevices<B>::Provide(2);
  Generator gen(16);
  Net<B> model(gen, d[0]);
  auto reference = Make<B>(model, 2, Sharding::kNone);
  auto dp = Make<B>(model, 2, Sharding::kParameters);
  Train(*reference, 0, 2);
  Train(*dp, 0, 2);
  ASSERT_TRUE(dp->GatherParameters().ok());
  Generator data(90);
  const auto x = Tensor<Autodiff<B>>::uniform({5, 4}, -2, 2, data, DType::kF64, d[0]);
  for (int twice = 0; twice < 2; ++twice) {
    EXPECT_EQ(dp->replica(0)(x).to_data().ToDoubles(), reference->replica(0)(x).to_data().ToDoubles());
  }
  Train(*dp, 2, 1);
  for (double v : Flat<B>(dp->replica(0))) ASSERT_TRUE(std::isnan(v));
}

// Gathers in bf16 (half the bytes) onto a model whose every parameter enters its matmul in
// bf16 anyway (compute dtype): DDP's bits, f32 master chunks, bf16 on the wire; and exact
// (f32) parameters from GatherParameters. Without the compute dtype the rounding shows.
TYPED_TEST(ShardedDataParallelTest, HalfGathersEqualDdpWhereParametersComputeInHalf) {
  using B = TypeParam;
  using ADB = Autodiff<B>;
  const auto d = TestDevices<B>::Provide(3);
  Generator gen(19);
  nn::Sequential<ADB> model;
  model.template add<nn::Linear<ADB>>(4, 8, gen, nn::LinearOptions{}, d[0])
      .template add<nn::GELU<ADB>>()
      .template add<nn::Linear<ADB>>(8, 3, gen, nn::LinearOptions{}, d[0]);
  const distributed::SyncOptions half{
      .bucket_bytes = 200, .sharding = Sharding::kParameters, .parameters = {.gather_dtype = DType::kBF16}};
  const auto loss = [](nn::Module<ADB>& m, const Tensor<ADB>& x, const Tensor<ADB>& y) {
    return nn::CrossEntropy(m(x).to(DType::kF32), y);
  };
  for (bool in_bf16 : {true, false}) {
    auto group = std::make_shared<DeviceGroup<ADB>>(d);  // a flight recorder of its own
    model.set_compute_dtype(in_bf16 ? std::optional<DType>(DType::kBF16) : std::nullopt);
    auto reference = DataParallel<B>::Create(model, group, MakeAdamW<B>, {.bucket_bytes = 200});
    auto sharded = DataParallel<B>::Create(model, group, MakeAdamW<B>, half);
    ASSERT_TRUE(reference.ok() && sharded.ok());
    for (int step = 0; step < 3; ++step) {
      Generator data(95 + step);
      const auto x = Tensor<B>::uniform({9, 4}, -2, 2, data, DType::kF32, d[0]);
      const auto y = Tensor<B>::uniform({9}, 0, 3, data, DType::kF32, d[0]).to(DType::kI64);
      ASSERT_TRUE((*reference)->Step(x, y, loss).ok());
      ASSERT_TRUE((*sharded)->Step(x, y, loss).ok());
    }
    if (in_bf16) {
      EXPECT_EQ(Params(**sharded), Flat<B>((*reference)->replica(0)));
    } else {
      EXPECT_NE(Params(**sharded), Flat<B>((*reference)->replica(0)));
    }
    int half_gathers = 0, exact_gathers = 0;
    for (const FlightDumpEntry& e : (*sharded)->group().inner().flight_recorder().Snapshot(false).entries) {
      if (e.op != "all_gather" || !absl::StartsWith(e.tag, "gather unit ")) continue;
      ++(e.dtype == "bf16" ? half_gathers : exact_gathers);
    }
    EXPECT_GT(half_gathers, 0);
    EXPECT_EQ(exact_gathers, 3 * 2);  // GatherParameters: each member's two layers, in f32
  }
}

// Whole values put into the replicas (a loaded checkpoint) become the members' chunks.
TYPED_TEST(ShardedDataParallelTest, ReshardTakesLoadedParameters) {
  using B = TypeParam;
  const auto d = TestDevices<B>::Provide(3);
  Generator gen(17), other(18);
  Net<B> model(gen, d[0]), trained(other, d[0]);
  auto reference = Make<B>(trained, 3, Sharding::kNone);
  auto dp = Make<B>(model, 3, Sharding::kParameters);
  std::map<std::string, Tensor<Autodiff<B>>> values;
  for (auto& [name, p] : trained.named_parameters()) values.emplace(name, *p);
  for (int r = 0; r < 3; ++r) dp->replica(r).load_parameters(values);
  dp->ReshardParameters();
  for (double v : Flat<B>(dp->replica(1))) ASSERT_TRUE(std::isnan(v));
  Train(*reference, 0, 2);
  Train(*dp, 0, 2);
  EXPECT_EQ(Params(*dp), Flat<B>(reference->replica(0)));
}

}  // namespace
}  // namespace kiln::distributed
