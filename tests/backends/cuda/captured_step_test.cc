// CapturedStep (distributed/captured_step.h) over the fake CUDA runtime: a replayed step makes
// no kernel launch, GEMM or allocation of its own, only one graph launch standing for exactly
// the eager step's kernels; its buffers keep their addresses; a new shape or learning rate
// captures again; what a replay cannot repeat is refused with a clear error. The fake counts
// kernels without running them, so these tests check bookkeeping, not numbers (the real-GPU
// test, captured_step_gpu_test, compares numbers).
#include "distributed/captured_step.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "backends/cuda/context.h"
#include "backends/cuda/fake/fake_runtime.h"
#include "distributed/data_parallel.h"
#include "distributed/device_group.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"

namespace kiln::distributed {
namespace {

using AD = Autodiff<Cuda>;
using T = Tensor<Cuda>;
using cuda::fake::Counts;
using cuda::fake::GetCounts;

const auto kMse = [](nn::Module<AD>& m, const Tensor<AD>& xs, const Tensor<AD>& ys) {
  return nn::MeanSquaredError(m(xs), ys);
};

std::unique_ptr<DataParallel<Cuda>> MakeDp(std::vector<CudaDevice> devices, bool adamw = false) {
  Generator gen(1);
  nn::Sequential<AD> model;
  model.add<nn::Linear<AD>>(10, 32, gen).add<nn::ReLU<AD>>().add<nn::Linear<AD>>(32, 1, gen);
  auto dp = DataParallel<Cuda>::Create(model, std::make_shared<DeviceGroup<AD>>(std::move(devices)),
                                       [adamw]() -> std::unique_ptr<nn::Optimizer<Cuda>> {
                                         if (adamw) return std::make_unique<nn::AdamW<Cuda>>(1e-3);
                                         return std::make_unique<nn::Sgd<Cuda>>(0.01, nn::SgdOptions{.momentum = 0.9});
                                       });
  EXPECT_TRUE(dp.ok()) << dp.status();
  return *std::move(dp);
}

struct Batch {
  T x, y;
};
Batch MakeBatch(int64_t n) {
  Generator gen(2);
  return {T::uniform({n, 10}, -1, 1, gen), T::uniform({n, 1}, -1, 1, gen)};
}

TEST(CapturedStep, AReplayIsOneGraphLaunchOfTheEagerStepsKernels) {
  auto dp = MakeDp({CudaDevice(0)});
  const Batch b = MakeBatch(16);
  // Eager steps until they repeat (the first creates the momentum), then one measured.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(dp->Step(b.x, b.y, kMse).ok());
  Counts before = GetCounts();
  ASSERT_TRUE(dp->Step(b.x, b.y, kMse).ok());
  const Counts eager = GetCounts() - before;
  ASSERT_GT(eager.launches, 10);

  auto step = CapturedStep::Create(*dp, kMse);
  ASSERT_TRUE(step.ok()) << step.status();
  CapturedStep& s = **step;
  ASSERT_TRUE(s.Step(b.x, b.y).ok());  // warm-up (eager) and capture
  EXPECT_EQ(s.stats().eager_steps, 1);
  EXPECT_EQ(s.stats().captures, 1);
  EXPECT_EQ(s.graphs(), 1);

  const cuda::CachingAllocator::Stats memory_before = cuda::Lookup(CudaDevice(0)).memory->GetStats();
  const int64_t steps_before = dp->optimizer(0).steps();
  for (int i = 0; i < 3; ++i) {
    before = GetCounts();
    absl::StatusOr<double> loss = s.Step(b.x, b.y);
    ASSERT_TRUE(loss.ok()) << loss.status();
    const Counts replay = GetCounts() - before;
    EXPECT_EQ(replay.launches, 0);
    EXPECT_EQ(replay.blas_calls, 0);
    EXPECT_EQ(replay.graph_launches, 1);
    EXPECT_EQ(replay.replayed_kernels, eager.launches + eager.blas_calls);
    EXPECT_EQ(replay.mallocs, 0);
    EXPECT_EQ(replay.copies, 2);  // x and y into the graph's buffers
    EXPECT_EQ(replay.syncs, 1);   // the loss, as eager Step's one wait
    // In the graph: each parameter and momentum slot written back, and the loss to the host.
    const int64_t state = static_cast<int64_t>(dp->replica(0).named_parameters().size() * 2);
    EXPECT_EQ(replay.replayed_copies, state + 1);
  }
  const cuda::CachingAllocator::Stats memory_after = cuda::Lookup(CudaDevice(0)).memory->GetStats();
  EXPECT_EQ(memory_after.hits + memory_after.misses, memory_before.hits + memory_before.misses);
  EXPECT_EQ(s.stats().replays, 3);
  EXPECT_EQ(dp->optimizer(0).steps(), steps_before + 3);
}

TEST(CapturedStep, TheGraphsBuffersStayPutAndTakeTheNewBatch) {
  auto dp = MakeDp({CudaDevice(0)});
  auto step = CapturedStep::Create(*dp, kMse);
  ASSERT_TRUE(step.ok()) << step.status();
  CapturedStep& s = **step;
  const Batch b = MakeBatch(8);
  ASSERT_TRUE(s.Step(b.x, b.y).ok());
  const T* input = s.input_buffer(b.x.shape());
  ASSERT_NE(input, nullptr);
  const void* input_address = input->primitive().data();
  std::vector<const void*> params;
  for (auto& [name, p] : dp->replica(0).named_parameters()) params.push_back(p->inner().primitive().data());

  const Batch other = {T::full({8, 10}, 0.25), T::full({8, 1}, -1.0)};
  ASSERT_TRUE(s.Step(other.x, other.y).ok());
  EXPECT_EQ(s.input_buffer(b.x.shape())->primitive().data(), input_address);
  // The fake really copies: the graph's input buffer holds this step's batch.
  EXPECT_EQ(s.input_buffer(b.x.shape())->to_data().ToDoubles(), other.x.to_data().ToDoubles());
  size_t i = 0;
  for (auto& [name, p] : dp->replica(0).named_parameters()) EXPECT_EQ(p->inner().primitive().data(), params[i++]);
}

TEST(CapturedStep, TheLossIsReadFromTheGraphsOutput) {
  auto dp = MakeDp({CudaDevice(0)});
  auto step = CapturedStep::Create(*dp, kMse);
  ASSERT_TRUE(step.ok()) << step.status();
  const Batch b = MakeBatch(8);
  ASSERT_TRUE((*step)->Step(b.x, b.y).ok());
  // The fake runs no kernel, so the loss the graph copies to the host is whatever its buffer
  // holds; two replays of the same graph must read the same buffer, hence the same value.
  absl::StatusOr<double> first = (*step)->Step(b.x, b.y), second = (*step)->Step(b.x, b.y);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
}

TEST(CapturedStep, ANewShapeCapturesAgainAndTheOldGraphStillReplays) {
  auto dp = MakeDp({CudaDevice(0)});
  auto step = CapturedStep::Create(*dp, kMse);
  ASSERT_TRUE(step.ok()) << step.status();
  CapturedStep& s = **step;
  const Batch small = MakeBatch(8), large = MakeBatch(24);
  ASSERT_TRUE(s.Step(small.x, small.y).ok());
  ASSERT_TRUE(s.Step(small.x, small.y).ok());
  Counts before = GetCounts();
  ASSERT_TRUE(s.Step(large.x, large.y).ok());  // eager warm-up, then its own capture
  EXPECT_GT((GetCounts() - before).launches, 0);
  EXPECT_EQ(s.graphs(), 2);
  EXPECT_EQ(s.stats().captures, 2);
  EXPECT_NE(s.graph(small.x.shape()), s.graph(large.x.shape()));
  for (const Batch* b : {&small, &large, &small}) {
    before = GetCounts();
    ASSERT_TRUE(s.Step(b->x, b->y).ok());
    EXPECT_EQ((GetCounts() - before).launches, 0);
    EXPECT_EQ((GetCounts() - before).graph_launches, 1);
    EXPECT_EQ((GetCounts() - before).copies, 2);  // the shapes share the state buffers: nothing to copy in
  }
}

TEST(CapturedStep, AnEagerStepInBetweenIsCopiedBackIntoTheGraphsState) {
  auto dp = MakeDp({CudaDevice(0)});
  auto step = CapturedStep::Create(*dp, kMse);
  ASSERT_TRUE(step.ok()) << step.status();
  const Batch b = MakeBatch(8);
  ASSERT_TRUE((*step)->Step(b.x, b.y).ok());
  const void* first = dp->replica(0).named_parameters()[0].second->inner().primitive().data();
  ASSERT_TRUE(dp->Step(b.x, b.y, kMse).ok());  // the module now holds other buffers
  EXPECT_NE(dp->replica(0).named_parameters()[0].second->inner().primitive().data(), first);
  const Counts before = GetCounts();
  ASSERT_TRUE((*step)->Step(b.x, b.y).ok());
  const int64_t state = static_cast<int64_t>(dp->replica(0).named_parameters().size() * 2);
  EXPECT_EQ((GetCounts() - before).copies, 2 + state);
  EXPECT_EQ(dp->replica(0).named_parameters()[0].second->inner().primitive().data(), first);
}

TEST(CapturedStep, ANewLearningRateCapturesAgain) {
  auto dp = MakeDp({CudaDevice(0)});
  auto step = CapturedStep::Create(*dp, kMse);
  ASSERT_TRUE(step.ok()) << step.status();
  const Batch b = MakeBatch(8);
  ASSERT_TRUE((*step)->Step(b.x, b.y).ok());
  dp->optimizer(0).set_lr(0.001);
  const Counts before = GetCounts();
  ASSERT_TRUE((*step)->Step(b.x, b.y).ok());
  EXPECT_GT((GetCounts() - before).launches, 0);  // eager again
  EXPECT_EQ((*step)->stats().captures, 2);
  EXPECT_EQ((*step)->graphs(), 1);
}

TEST(CapturedStep, RefusesWhatAReplayCannotRepeat) {
  // (Groups of two devices need NCCL, which the fake does not stand in for:
  // captured_step_gpu_test checks their refusal on a machine with two GPUs.)
  auto adamw = MakeDp({CudaDevice(0)}, /*adamw=*/true);
  absl::Status s = CapturedStep::Create(*adamw, kMse).status();
  EXPECT_EQ(s.message(),
            "CapturedStep: optimizer adamw is not replayable (its update depends on the step count, which a graph "
            "replay cannot advance); use SGD");

  auto dp = MakeDp({CudaDevice(0)});
  dp->set_clip_grad_norm(1.0);
  auto clipped = CapturedStep::Create(*dp, kMse);
  ASSERT_TRUE(clipped.ok());
  const Batch b = MakeBatch(8);
  s = (*clipped)->Step(b.x, b.y).status();
  EXPECT_TRUE(absl::StartsWith(s.message(), "CapturedStep: gradient clipping reads")) << s;
}

// nn::CrossEntropy picks each row's target with gather, whose index check reads a flag back.
TEST(CapturedStep, ALossThatChecksOnTheHostIsRefusedNamingTheOp) {
  Generator gen(1);
  nn::Sequential<AD> model;
  model.add<nn::Linear<AD>>(10, 3, gen);
  auto dp = DataParallel<Cuda>::Create(model, std::make_shared<DeviceGroup<AD>>(std::vector<CudaDevice>{CudaDevice(0)}),
                                       [] { return std::make_unique<nn::Sgd<Cuda>>(0.1); });
  ASSERT_TRUE(dp.ok()) << dp.status();
  const auto cross_entropy = [](nn::Module<AD>& m, const Tensor<AD>& xs, const Tensor<AD>& ys) {
    return nn::CrossEntropy(m(xs), ys);
  };
  auto step = CapturedStep::Create(**dp, cross_entropy);
  ASSERT_TRUE(step.ok());
  const T x = T::zeros({4, 10}), y = T::zeros({4}, DType::kI64);
  const absl::Status s = (*step)->Step(x, y).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(s.message()),
            "CapturedStep: capturing the step of x f32[4,10], y i64[4] (this call's step ran eagerly): cuda:0: "
            "gather (the index range check) waits for the device or the host, which a CUDA graph capture "
            "cannot hold (a capture records work without running it, and a replay would skip the wait): leave it "
            "out of the captured step")
      << s;
  EXPECT_EQ((*step)->graphs(), 0);
  EXPECT_FALSE(cuda::Lookup(CudaDevice(0)).capturing.load());
  EXPECT_TRUE((**dp).Step(x, y, cross_entropy).ok());  // eager steps go on
}

}  // namespace
}  // namespace kiln::distributed
