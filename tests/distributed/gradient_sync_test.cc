// Gradient all-reduce as a backward op, on every backend with collective kernels: synced
// gradients equal the sum / mean of the per-device gradients, whatever the graph, the bucket
// size or the unused parameters.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "distributed/gradient_sync.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "tests/backends.h"

namespace kiln::distributed {
namespace {

using ::kiln::testing::ConfigNames;
using ::kiln::testing::DistributedBackends;
using ::kiln::testing::TestDevices;

template <class B>
using Graph = std::function<Tensor<Autodiff<B>>(const Tensor<Autodiff<B>>& w, const Tensor<Autodiff<B>>& x)>;

// One used parameter W [3,3] and one never used, V.
template <class B>
class Probe : public nn::Module<Autodiff<B>> {
 public:
  using AD = Tensor<Autodiff<B>>;
  Probe(Generator& gen, Graph<B> graph, const typename B::Device& device) : graph_(std::move(graph)) {
    this->add_parameter("w", AD::uniform({3, 3}, -1, 1, gen, DType::kF64, device));
    this->add_parameter("unused", AD::uniform({2}, -1, 1, gen, DType::kF64, device));
  }
  AD forward(const AD& x) override { return graph_(this->param(0), x); }
  std::unique_ptr<nn::Module<Autodiff<B>>> clone() const override { return this->template CloneAs<Probe>(); }
  const AD& w() const { return this->param(0); }
  const AD& unused() const { return this->param(1); }

 private:
  Graph<B> graph_;
};

template <class B>
const std::vector<std::pair<const char*, Graph<B>>>& Graphs() {
  using AD = Tensor<Autodiff<B>>;
  static const auto* graphs = new std::vector<std::pair<const char*, Graph<B>>>{
      {"matmul", [](const AD& w, const AD& x) { return w.matmul(x); }},
      {"residual", [](const AD& w, const AD& x) { return w.matmul(x) + w; }},
      {"activation", [](const AD& w, const AD& x) { return w.matmul(x).tanh(); }},
      {"diamond",
       [](const AD& w, const AD& x) {
         const std::vector<AD> parts = {w.matmul(x * 2), w.matmul(x.exp())};
         return AD::cat(parts, 1);
       }},
  };
  return *graphs;
}

// Replicas of `model` on the devices d, each with its own GradientSync over one group.
template <class B>
struct Replicas {
  Replicas(const nn::Module<Autodiff<B>>& model, const std::vector<typename B::Device>& d, SyncOptions options = {},
           GroupOptions group_options = {})
      : group(d, group_options) {
    for (size_t r = 0; r < d.size(); ++r) {
      modules.push_back(model.clone_to(d[r]));
      syncs.push_back(std::make_unique<GradientSync<B>>(group, static_cast<int>(r), *modules[r], options));
    }
  }
  Probe<B>& probe(int r) { return static_cast<Probe<B>&>(*modules[r]); }

  DeviceGroup<B> group;
  std::vector<std::unique_ptr<nn::Module<Autodiff<B>>>> modules;
  std::vector<std::unique_ptr<GradientSync<B>>> syncs;
};

// Runs body(r) for members 0 and 1 at once, a thread each: a collective needs both.
template <class F>
void OnBothMembers(F body) {
  std::thread other(body, 1);
  body(0);
  other.join();
}

template <class B>
class GradientSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_IF_UNAVAILABLE(B);
    KILN_SKIP_IF_FEWER_DEVICES(B, ::kiln::testing::kDistributedDevices);
  }
};
TYPED_TEST_SUITE(GradientSyncTest, DistributedBackends, ConfigNames);

TYPED_TEST(GradientSyncTest, SyncedEqualsTheReductionOfLocalGradients) {
  using B = TypeParam;
  using AD = Tensor<Autodiff<B>>;
  const auto d = TestDevices<B>::Provide(2);
  for (const auto& [name, graph] : Graphs<B>()) {
    for (ReduceOp kind : {ReduceOp::kSum, ReduceOp::kMean}) {
      SCOPED_TRACE(std::string(name) + " " + OpName(kind));
      Generator gen(1);
      Replicas<B> replicas(Probe<B>(gen, graph, d[0]), d, SyncOptions{.reduce = kind});
      for (int step = 0; step < 20; ++step) {
        std::vector<std::vector<double>> local(2), synced(2), unused(2);
        OnBothMembers([&](int r) {
          Generator data(100 * step + r);
          auto& m = replicas.probe(r);
          const AD x = AD::uniform({3, 3}, -1, 1, data, DType::kF64, d[r]);
          const auto grads = m(x).sum().backward();
          local[r] = grads.get(m.w())->to_data().ToDoubles();
          auto s = replicas.syncs[r]->Finish(grads);
          ASSERT_TRUE(s.ok()) << s.status();
          synced[r] = s->get(m.w())->to_data().ToDoubles();
          unused[r] = s->get(m.unused())->to_data().ToDoubles();
        });
        for (size_t i = 0; i < local[0].size(); ++i) {
          const double want = kind == ReduceOp::kSum ? local[0][i] + local[1][i] : (local[0][i] + local[1][i]) / 2;
          ASSERT_EQ(synced[0][i], want) << "step " << step << " element " << i;
        }
        EXPECT_EQ(synced[0], synced[1]);                    // bit-identical on both members
        EXPECT_EQ(unused[0], std::vector<double>(2, 0.0));  // no hang, zero
      }
    }
  }
}

// Trains the same two replicas with two bucket sizes: every bit of every gradient agrees, and
// with small buckets several are full (handed to communication) while backward still runs.
TYPED_TEST(GradientSyncTest, BucketsOverlapBackwardAndChangeNoResult) {
  using B = TypeParam;
  using ADB = Autodiff<B>;
  using AD = Tensor<ADB>;
  const auto d = TestDevices<B>::Provide(2);
  std::vector<std::vector<double>> results;
  for (int64_t bucket_bytes : {int64_t{1}, int64_t{25} << 20}) {
    Generator gen(2);
    nn::Sequential<ADB> model;
    model.template add<nn::Linear<ADB>>(6, 16, gen, nn::LinearOptions{.dtype = DType::kF64}, d[0])
        .template add<nn::Linear<ADB>>(16, 16, gen, nn::LinearOptions{.dtype = DType::kF64}, d[0])
        .template add<nn::Linear<ADB>>(16, 2, gen, nn::LinearOptions{.dtype = DType::kF64}, d[0]);
    Replicas<B> replicas(model, d, SyncOptions{.bucket_bytes = bucket_bytes});
    const auto& syncs = replicas.syncs;
    EXPECT_EQ(syncs[0]->bucket_count(), bucket_bytes == 1 ? 6 : 1);
    std::vector<double> flat;
    OnBothMembers([&](int r) {
      Generator data(7 + r);
      const AD x = AD::uniform({5, 6}, -1, 1, data, DType::kF64, d[r]);
      auto s = syncs[r]->Finish((*replicas.modules[r])(x).tanh().sum().backward());
      ASSERT_TRUE(s.ok()) << s.status();
      if (r == 0) {
        for (auto& [name, p] : replicas.modules[r]->named_parameters()) {
          for (double v : s->get(*p)->to_data().ToDoubles()) flat.push_back(v);
        }
      }
    });
    EXPECT_EQ(syncs[0]->buckets_started_in_backward(), syncs[0]->bucket_count());
    results.push_back(flat);
  }
  EXPECT_EQ(results[0], results[1]);
}

// In one process on a host-staged engine, backward's own thread reduces each bucket as it
// fills: the communication thread is never woken for them (a wake-up takes a core from backward
// and contends for the lock), only for a queued job, which still runs in its place.
TYPED_TEST(GradientSyncTest, InOneProcessOnlyAJobWakesTheCommunicationThread) {
  using B = TypeParam;
  using ADB = Autodiff<B>;
  using AD = Tensor<ADB>;
  const auto d = TestDevices<B>::Provide(2);
  Generator gen(3);
  nn::Sequential<ADB> model;
  model.template add<nn::Linear<ADB>>(6, 16, gen, nn::LinearOptions{.dtype = DType::kF64}, d[0])
      .template add<nn::Linear<ADB>>(16, 2, gen, nn::LinearOptions{.dtype = DType::kF64}, d[0]);
  for (Sharding sharding : {Sharding::kNone, Sharding::kOptimizer, Sharding::kGradients}) {
    SCOPED_TRACE(ShardingName(sharding));
    Replicas<B> replicas(model, d, SyncOptions{.bucket_bytes = 1, .sharding = sharding});
    if (!InlineReduce(replicas.group)) GTEST_SKIP() << "this engine reduces on the communication thread";
    for (int step = 0; step < 5; ++step) {
      OnBothMembers([&](int r) {
        Generator data(10 * step + r);
        const AD x = AD::uniform({5, 6}, -1, 1, data, DType::kF64, d[r]);
        const auto grads = (*replicas.modules[r])(x).tanh().sum().backward();
        const absl::Status s = sharding == Sharding::kNone ? replicas.syncs[r]->Finish(grads).status()
                                                           : replicas.syncs[r]->FinishShards().status();
        ASSERT_TRUE(s.ok()) << s;
      });
    }
    for (int r = 0; r < 2; ++r) EXPECT_EQ(replicas.syncs[r]->communication_wakeups(), 0) << "member " << r;
    std::future<absl::Status> job = replicas.syncs[0]->Enqueue([] { return absl::OkStatus(); });
    EXPECT_EQ(job.get(), absl::OkStatus());
    EXPECT_GE(replicas.syncs[0]->communication_wakeups(), 1);
  }
}

TYPED_TEST(GradientSyncTest, AccumulatesMicroBatchesAndSyncsOnTheLast) {
  using B = TypeParam;
  using AD = Tensor<Autodiff<B>>;
  const auto d = TestDevices<B>::Provide(2);
  Generator gen(3);
  Replicas<B> replicas(Probe<B>(gen, Graphs<B>()[2].second, d[0]), d, SyncOptions{.reduce = ReduceOp::kSum});
  std::vector<std::vector<double>> total(2), synced(2);
  OnBothMembers([&](int r) {
    auto& m = replicas.probe(r);
    Gradients<B> sum;
    for (int micro = 0; micro < 3; ++micro) {
      replicas.syncs[r]->set_sync_enabled(micro == 2);
      Generator data(10 * r + micro);
      const auto grads = m(AD::uniform({3, 3}, -1, 1, data, DType::kF64, d[r])).sum().backward();
      sum.accumulate(grads);
      auto s = replicas.syncs[r]->Finish(grads);
      ASSERT_TRUE(s.ok());
      if (micro == 2) synced[r] = s->get(m.w())->to_data().ToDoubles();
    }
    total[r] = sum.get(m.w())->to_data().ToDoubles();
  });
  for (size_t i = 0; i < total[0].size(); ++i) EXPECT_NEAR(synced[0][i], total[0][i] + total[1][i], 1e-12);
}

// Sharded, each member gets its chunk (shard_layout.h) of the reduction of the members' local
// gradients, accumulated over micro-batches as unsharded; the sync takes every gradient, so
// backward's own result holds none; Finish refuses a sharded sync.
TYPED_TEST(GradientSyncTest, ShardedSyncHandsEachMemberItsChunkOfTheReduction) {
  using B = TypeParam;
  using AD = Tensor<Autodiff<B>>;
  const auto d = TestDevices<B>::Provide(2);
  for (Sharding stage : {Sharding::kOptimizer, Sharding::kGradients}) {
    SCOPED_TRACE(ShardingName(stage));
    Generator gen(3);
    const Probe<B> model(gen, Graphs<B>()[1].second, d[0]);
    Replicas<B> replicas(model, d, SyncOptions{.bucket_bytes = 1, .reduce = ReduceOp::kSum, .sharding = stage});
    std::vector<std::optional<Tensor<B>>> local(2);  // each member's summed micro-batch gradients of w
    std::vector<std::vector<Tensor<B>>> chunks(2);
    OnBothMembers([&](int r) {
      auto& m = replicas.probe(r);
      auto plain = model.clone_to(d[r]);  // the same values, no sync on its leaves
      for (int micro = 0; micro < 3; ++micro) {
        replicas.syncs[r]->set_sync_enabled(micro == 2);
        Generator data(10 * r + micro);
        const AD x = AD::uniform({3, 3}, -1, 1, data, DType::kF64, d[r]);
        EXPECT_EQ(m(x).sum().backward().size(), 0) << "the sync takes the gradients";
        const Tensor<B> g = *(*plain)(x).sum().backward().get(*plain->named_parameters()[0].second);
        local[r] = local[r] ? *local[r] + g : g;
      }
      auto s = replicas.syncs[r]->FinishShards();
      ASSERT_TRUE(s.ok()) << s.status();
      chunks[r] = *s;
      EXPECT_EQ(replicas.syncs[r]->Finish(Gradients<B>()).status().message(),
                "gradient sync: sharded; call FinishShards");
    });
    const Tensor<B> total = *local[0] + local[1]->to(d[0]);
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(chunks[r].size(), 2u);  // w [3, 3]: chunks of 5; unused [2]: chunks of 1
      EXPECT_EQ(chunks[r][0].to_data().ToDoubles(), ChunkOf(total, r, 2).to_data().ToDoubles()) << "member " << r;
      EXPECT_EQ(chunks[r][1].to_data().ToDoubles(), std::vector<double>{0.0}) << "member " << r;
    }
  }
}

TYPED_TEST(GradientSyncTest, AnExtraBackwardCannotMixRounds) {
  using B = TypeParam;
  using AD = Tensor<Autodiff<B>>;
  const auto d = TestDevices<B>::Provide(2);
  Generator gen(4);
  Replicas<B> replicas(Probe<B>(gen, Graphs<B>()[0].second, d[0]), d, {}, {.timeout = std::chrono::milliseconds(500)});
  std::vector<absl::Status> statuses(2);
  OnBothMembers([&](int r) {
    const AD x = AD::ones({3, 2}, DType::kF64, d[r]);
    auto first = replicas.probe(r)(x).sum().backward();
    auto second = replicas.probe(r)(x).sum().backward();  // no Finish in between
    statuses[r] = replicas.syncs[r]->Finish(second).status();
  });
  for (const auto& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.message(),
              "gradient sync: parameter w got a second gradient in step 0 before Finish; "
              "call Finish after every backward that syncs");
  }
}

// A group of one member (one device, one process: every single-device run of DataParallel):
// the all-reduce is the identity, so the synced gradients are the local ones, not copies.
TYPED_TEST(GradientSyncTest, AGroupOfOneHandsBackTheLocalGradients) {
  using B = TypeParam;
  using AD = Tensor<Autodiff<B>>;
  const auto d = TestDevices<B>::Provide(1);
  for (ReduceOp kind : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
    SCOPED_TRACE(OpName(kind));
    Generator gen(5);
    Probe<B> model(gen, Graphs<B>()[1].second, d[0]);
    DeviceGroup<B> group(d);
    GradientSync<B> sync(group, 0, model, SyncOptions{.reduce = kind});
    for (int step = 0; step < 3; ++step) {
      Generator data(step);
      const auto grads = model(AD::uniform({3, 3}, -1, 1, data, DType::kF64, d[0])).sum().backward();
      auto s = sync.Finish(grads);
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(s->get(model.w())->to_data().ToDoubles(), grads.get(model.w())->to_data().ToDoubles());
      EXPECT_EQ(s->get(model.unused())->to_data().ToDoubles(), std::vector<double>(2, 0.0));
      if constexpr (std::is_same_v<B, Cpu>) {
        EXPECT_EQ(s->get(model.w())->primitive().buffer, grads.get(model.w())->primitive().buffer);
      }
    }
  }
}

// bf16 compression (SyncOptions::reduce_dtype): each member's bucket rounded to bf16, the
// reduction in f32 rounded once to bf16, widened back, so the synced gradient is exactly
// bf16(reduce(bf16(g0), bf16(g1))) on both members.
TYPED_TEST(GradientSyncTest, Bf16CompressionRoundsEachBucketAndTheResultOnce) {
  using B = TypeParam;
  using AD = Tensor<Autodiff<B>>;
  const auto d = TestDevices<B>::Provide(2);
  for (ReduceOp kind : {ReduceOp::kSum, ReduceOp::kMean}) {
    SCOPED_TRACE(OpName(kind));
    Generator gen(3);
    Replicas<B> replicas(Probe<B>(gen, Graphs<B>()[2].second, d[0]), d,
                         SyncOptions{.reduce = kind, .reduce_dtype = DType::kBF16});
    std::vector<std::vector<double>> local(2), synced(2);
    OnBothMembers([&](int r) {
      Generator data(7 + r);
      auto& m = replicas.probe(r);
      const auto grads = m(AD::uniform({3, 3}, -1, 1, data, DType::kF64, d[r])).sum().backward();
      local[r] = grads.get(m.w())->to_data().ToDoubles();
      auto s = replicas.syncs[r]->Finish(grads);
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(s->get(m.w())->dtype(), DType::kF64);  // widened back to the parameter's dtype
      synced[r] = s->get(m.w())->to_data().ToDoubles();
    });
    for (size_t i = 0; i < local[0].size(); ++i) {
      const float a = static_cast<float>(BFloat16(local[0][i])), b = static_cast<float>(BFloat16(local[1][i]));
      const float reduced = kind == ReduceOp::kSum ? a + b : (a + b) / 2;
      EXPECT_EQ(synced[0][i], static_cast<double>(static_cast<float>(BFloat16(reduced)))) << "element " << i;
      EXPECT_NE(synced[0][i], kind == ReduceOp::kSum ? local[0][i] + local[1][i] : (local[0][i] + local[1][i]) / 2);
    }
    EXPECT_EQ(synced[0], synced[1]);
  }
}

// Sharded stages hold a bucket's whole gradients and their packed copy beside 1/N of the model
// state, so they default to smaller buckets than DDP's 25 MiB; a size given is kept.
TEST(SyncOptionsTest, ShardedStagesDefaultToSmallerBuckets) {
  EXPECT_EQ(BucketBytes({}), int64_t{25} << 20);
  EXPECT_EQ(BucketBytes({.sharding = Sharding::kOptimizer}), int64_t{4} << 20);
  EXPECT_EQ(BucketBytes({.sharding = Sharding::kGradients}), int64_t{4} << 20);
  EXPECT_EQ(BucketBytes({.bucket_bytes = 300, .sharding = Sharding::kGradients}), 300);
  EXPECT_EQ(BucketBytes({.bucket_bytes = int64_t{25} << 20, .sharding = Sharding::kGradients}), int64_t{25} << 20);
  // A 4 MiB + 4 KiB weight and its bias (f32): one DDP bucket, two sharded ones.
  Generator gen(3);
  nn::Sequential<Autodiff<Cpu>> model;
  model.add<nn::Linear<Autodiff<Cpu>>>(1025, 1024, gen);
  const auto d = TestDevices<Cpu>::Provide(2);
  EXPECT_EQ(Replicas<Cpu>(model, d).syncs[0]->bucket_count(), 1);
  EXPECT_EQ(Replicas<Cpu>(model, d, {.sharding = Sharding::kGradients}).syncs[0]->bucket_count(), 2);
}

}  // namespace
}  // namespace kiln::distributed
