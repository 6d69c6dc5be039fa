// Differentiable collectives: each one's backward is a collective over the same group, run by
// every member inside its own backward pass.
#include <gtest/gtest.h>

#include <thread>

#include "distributed/autodiff_group.h"

namespace kiln::distributed {
namespace {

using AD = Tensor<Autodiff<Cpu>>;

class AutodiffCollectives : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cpu::Configure({.devices = 2, .threads_per_device = 1}).ok()); }
  DeviceGroup<Autodiff<Cpu>> group_{{CpuDevice(0), CpuDevice(1)}};

  // Runs f(rank, x) on each member's thread with x = value[rank] (a leaf), takes the sum of the
  // result as that member's loss, and returns each member's (output, gradient).
  template <class F>
  std::vector<std::pair<std::vector<double>, std::vector<double>>> Run(std::vector<std::vector<double>> values, F f) {
    std::vector<std::pair<std::vector<double>, std::vector<double>>> out(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        const int64_t n = static_cast<int64_t>(values[r].size());
        const AD x = AD::from_vector(values[r], {n}, CpuDevice(r)).require_grad();
        const AD y = f(r, x);
        out[r].first = y.to_data().ToDoubles();
        out[r].second = y.sum().backward().get(x)->to_data().ToDoubles();
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }
};

TEST_F(AutodiffCollectives, AllReduceSumAndMean) {
  auto sum = Run({{2}, {4}}, [&](int r, const AD& x) { return *group_.AllReduce(r, x, ReduceKind::kSum); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(sum[r].first, std::vector<double>{6});
    EXPECT_EQ(sum[r].second, std::vector<double>{2});
  }
  auto mean = Run({{2}, {4}}, [&](int r, const AD& x) { return *group_.AllReduce(r, x, ReduceKind::kMean); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(mean[r].first, std::vector<double>{3});
    EXPECT_EQ(mean[r].second, std::vector<double>{1});
  }
  auto odd = Run({{2}, {5}}, [&](int r, const AD& x) { return *group_.AllReduce(r, x, ReduceKind::kSum); });
  EXPECT_EQ(odd[1].first, std::vector<double>{7});
  EXPECT_EQ(odd[1].second, std::vector<double>{2});
}

TEST_F(AutodiffCollectives, AllReduceMaxRoutesToTheHolder) {
  auto max = Run({{1, 9}, {5, 9}}, [&](int r, const AD& x) { return *group_.AllReduce(r, x, ReduceKind::kMax); });
  EXPECT_EQ(max[0].first, (std::vector<double>{5, 9}));
  EXPECT_EQ(max[0].second, (std::vector<double>{0, 1}));  // a tie shares the summed gradient 2
  EXPECT_EQ(max[1].second, (std::vector<double>{2, 1}));
}

TEST_F(AutodiffCollectives, AllGatherAndReduceScatterAreEachOthersBackward) {
  // Member r's loss weights the gathered [4] vector by (r + 1): d/dx = reduce_scatter of those.
  auto gathered = Run({{1, 2}, {3, 4}}, [&](int r, const AD& x) {
    return *group_.AllGather(r, x) * (r + 1.0);
  });
  EXPECT_EQ(gathered[0].first, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(gathered[0].second, (std::vector<double>{3, 3}));  // 1 + 2 for each element
  EXPECT_EQ(gathered[1].second, (std::vector<double>{3, 3}));
  auto scattered = Run({{1, 2, 3, 4}, {10, 20, 30, 40}}, [&](int r, const AD& x) {
    return *group_.ReduceScatter(r, x, ReduceKind::kSum) * (r + 1.0);
  });
  EXPECT_EQ(scattered[0].first, (std::vector<double>{11, 22}));
  EXPECT_EQ(scattered[1].first, (std::vector<double>{66, 88}));  // [33, 44] * 2
  // Each input element reaches exactly one member's output, weighted by that member.
  EXPECT_EQ(scattered[0].second, (std::vector<double>{1, 1, 2, 2}));
  EXPECT_EQ(scattered[1].second, (std::vector<double>{1, 1, 2, 2}));
}

TEST_F(AutodiffCollectives, ReduceScatterOfAnExtremeIsNotDifferentiable) {
  const AD x = AD::ones({2}, DType::kF64, CpuDevice(0)).require_grad();
  const auto s = group_.ReduceScatter(0, x, ReduceKind::kMax);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.status().message(), "reduce_scatter(max) is not differentiable in kiln; use sum or mean");
}

TEST_F(AutodiffCollectives, BroadcastBackwardReducesToTheRoot) {
  auto b = Run({{1, 2}, {7, 7}}, [&](int r, const AD& x) { return *group_.Broadcast(r, x, 0) * (r + 1.0); });
  EXPECT_EQ(b[1].first, (std::vector<double>{2, 4}));
  EXPECT_EQ(b[0].second, (std::vector<double>{3, 3}));  // 1 + 2
  EXPECT_EQ(b[1].second, (std::vector<double>{0, 0}));
}

}  // namespace
}  // namespace kiln::distributed
