// The step breakdown's profiler (bench/op_profile.h, bench/profiled_backend.h): known ops land
// in their categories, the categories account for a whole GPT step's wall time as a clock
// outside the profiler measures it, and the CPU backend's counters count only while on.
#include "bench/op_profile.h"

#include <gtest/gtest.h>

#include <chrono>

#include "backends/cpu/profile_counters.h"
#include "bench/gpt_step.h"
#include "bench/profiled_backend.h"
#include "tensor/fused.h"

namespace kiln::bench {
namespace {

using P = Profiled<Cpu>;
using T = Tensor<P>;

class OpProfileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cpu::Configure({.devices = 1, .threads_per_device = 2}).ok()); }
};

const Totals& Of(const Profile& p, Category c) { return p.categories[static_cast<int>(c)]; }
const Totals& Of(const Profile& p, OpId op) { return p.ops[static_cast<int>(op)]; }

// Runs `f` profiled; the profile.
template <class F>
Profile Profiled(F f) {
  OpProfile::Start();
  f();
  return OpProfile::Stop();
}

TEST_F(OpProfileTest, KnownOpsLandInTheirCategories) {
  Generator gen(1);
  const T a = T::uniform({64, 32}, -1, 1, gen), b = T::uniform({32, 16}, -1, 1, gen);
  const Profile gemm = Profiled([&] { (void)a.matmul(b); });
  EXPECT_EQ(Of(gemm, OpId::k_matmul).calls, 1);
  EXPECT_EQ(Of(gemm, Category::kGemm).calls, 1);
  EXPECT_GT(Of(gemm, Category::kGemm).ns, 0);
  EXPECT_EQ(Of(gemm, Category::kFused).calls + Of(gemm, Category::kElementwise).calls, 0);

  const Profile softmax = Profiled([&] { (void)fused::softmax_last(a, false, false); });
  EXPECT_EQ(Of(softmax, OpId::k_softmax_last).calls, 1);
  EXPECT_EQ(Of(softmax, Category::kFused).calls, 1);
  EXPECT_EQ(Of(softmax, Category::kGemm).calls, 0);

  const Profile add = Profiled([&] { (void)(a + a); });
  EXPECT_EQ(Of(add, Category::kElementwise).calls, 1);
  EXPECT_EQ(Of(add, OpId::k_binary).calls, 1);

  const Profile cast = Profiled([&] { (void)a.to(DType::kBF16); });
  EXPECT_EQ(Of(cast, Category::kCast).calls, 1);

  const Profile layout = Profiled([&] { (void)a.permute({1, 0}).reshape({-1}); });
  EXPECT_EQ(Of(layout, Category::kLayout).calls, 2);
  EXPECT_EQ(Of(layout, Category::kElementwise).calls, 0);

  // Inside an optimizer's update every op is the optimizer's.
  const Profile optimizer = Profiled([&] {
    OptimizerScope scope;
    (void)(a * 0.5f);
  });
  int64_t calls = 0;
  for (const Totals& t : optimizer.categories) calls += t.calls;
  EXPECT_EQ(Of(optimizer, OpId::k_binary).calls, 1);
  EXPECT_GE(Of(optimizer, Category::kOptimizer).calls, 1);
  EXPECT_EQ(Of(optimizer, Category::kOptimizer).calls,
            calls - Of(optimizer, Category::kAllocation).calls - Of(optimizer, Category::kSynchronisation).calls);
}

TEST_F(OpProfileTest, NothingIsRecordedWhileStopped) {
  Generator gen(2);
  const T a = T::uniform({8, 8}, -1, 1, gen);
  (void)Profiled([] {});
  (void)a.matmul(a);
  const Profile p = Profiled([] {});
  EXPECT_EQ(Of(p, Category::kGemm).calls, 0);
}

// One step of examples/gpt's model, small: the categories (rest included) add up to the wall
// time a clock outside the profiler reads, the ops, allocation and waits never exceed it, and
// the GEMM count is the model's: per block the linear layers QKV, projection, fc and fc
// projection, plus the tied head, each forward GEMM with two in backward; the attention's
// products are inside its fused op, forward and backward once per block.
TEST_F(OpProfileTest, CategoriesAccountForTheStepsWallTime) {
  GptBenchConfig c{
      .name = "small", .model = {.vocab = 256, .context = 32, .layers = 2, .heads = 2, .width = 64}, .batch = 8};
  GptStep<P> step(c, nn::Precision::kF32, /*profiled=*/true);
  step.Step();  // warm
  const auto start = std::chrono::steady_clock::now();
  const Profile p = Profiled([&] { step.Step(); });
  const double outside_ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();

  int64_t sum = 0, phases = 0;
  for (const Totals& t : p.categories) sum += t.ns;
  for (int64_t ns : p.phase_ns) phases += ns;
  EXPECT_EQ(sum, p.wall_ns);
  EXPECT_NEAR(static_cast<double>(sum), outside_ns, 0.05 * outside_ns + 1e6);
  EXPECT_NEAR(static_cast<double>(phases), static_cast<double>(p.wall_ns), 0.01 * p.wall_ns);
  EXPECT_GE(Of(p, Category::kFramework).ns, 0) << "ops, allocation and waits overlap: counted twice";
  EXPECT_EQ(Of(p, Category::kGemm).calls, 3 * (4 * c.model.layers + 1));
  EXPECT_EQ(Of(p, Category::kAttention).calls, 2 * c.model.layers);
  EXPECT_GT(Of(p, Category::kFused).calls, 0);
  EXPECT_GT(Of(p, Category::kOptimizer).calls, 0);
  EXPECT_GT(Of(p, Category::kAllocation).calls, 0);
  EXPECT_GT(p.phase_ns[static_cast<int>(Phase::kForward)], 0);
  EXPECT_GT(p.phase_ns[static_cast<int>(Phase::kBackward)], 0);
  EXPECT_GT(p.phase_ns[static_cast<int>(Phase::kOptimizer)], 0);
}

TEST_F(OpProfileTest, CpuCountersCountOnlyWhenOn) {
  Generator gen(3);
  const auto big = Tensor<Cpu>::uniform({1 << 20}, -1, 1, gen);
  cpu::SetProfileCounting(false);
  const cpu::ProfileCounts before = cpu::ReadProfileCounts();
  (void)(big + big);
  const cpu::ProfileCounts off = cpu::ReadProfileCounts();
  EXPECT_EQ(off.allocations, before.allocations);
  EXPECT_EQ(off.synchronisations, before.synchronisations);

  cpu::SetProfileCounting(true);
  (void)(big + big);  // an output allocated and freed, its loop split over two threads
  cpu::SetProfileCounting(false);
  const cpu::ProfileCounts on = cpu::ReadProfileCounts();
  EXPECT_GE(on.allocations - off.allocations, 2);
  EXPECT_GE(on.synchronisations - off.synchronisations, 1);
  EXPECT_GT(on.allocation_ns, off.allocation_ns);
}

}  // namespace
}  // namespace kiln::bench
