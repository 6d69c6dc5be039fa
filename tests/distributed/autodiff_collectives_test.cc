// Differentiable collectives on every backend with collective kernels: each one's backward is
// a collective over the same group, run by every member inside its own backward pass.
#include <gtest/gtest.h>

#include <thread>
#include <utility>
#include <vector>

#include "distributed/autodiff_group.h"
#include "tests/backends.h"

namespace kiln::distributed {
namespace {

using ::kiln::testing::ConfigNames;
using ::kiln::testing::DistributedBackends;
using ::kiln::testing::TestDevices;

template <class B>
class AutodiffCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_IF_UNAVAILABLE(B);
    KILN_SKIP_IF_FEWER_DEVICES(B, ::kiln::testing::kDistributedDevices);
  }
  using AD = Tensor<Autodiff<B>>;

  // Runs f(rank, x) on each member's thread with x = value[rank] (a leaf), takes the sum of the
  // result as that member's loss, and returns each member's (output, gradient).
  template <class F>
  std::vector<std::pair<std::vector<double>, std::vector<double>>> Run(std::vector<std::vector<double>> values, F f) {
    std::vector<std::pair<std::vector<double>, std::vector<double>>> out(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        const int64_t n = static_cast<int64_t>(values[r].size());
        const AD x = AD::from_vector(values[r], {n}, devices_[r]).require_grad();
        const AD y = f(r, x);
        out[r].first = y.to_data().ToDoubles();
        out[r].second = y.sum().backward().get(x)->to_data().ToDoubles();
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  const std::vector<typename B::Device> devices_ = TestDevices<B>::Provide(2);
  DeviceGroup<Autodiff<B>> group_{devices_};
};
TYPED_TEST_SUITE(AutodiffCollectives, DistributedBackends, ConfigNames);

TYPED_TEST(AutodiffCollectives, AllReduceSumAndMean) {
  using AD = Tensor<Autodiff<TypeParam>>;
  auto sum = this->Run({{2}, {4}}, [&](int r, const AD& x) { return *this->group_.AllReduce(r, x, ReduceOp::kSum); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(sum[r].first, std::vector<double>{6});
    EXPECT_EQ(sum[r].second, std::vector<double>{2});
  }
  auto mean = this->Run({{2}, {4}}, [&](int r, const AD& x) { return *this->group_.AllReduce(r, x, ReduceOp::kMean); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(mean[r].first, std::vector<double>{3});
    EXPECT_EQ(mean[r].second, std::vector<double>{1});
  }
  auto odd = this->Run({{2}, {5}}, [&](int r, const AD& x) { return *this->group_.AllReduce(r, x, ReduceOp::kSum); });
  EXPECT_EQ(odd[1].first, std::vector<double>{7});
  EXPECT_EQ(odd[1].second, std::vector<double>{2});
}

TYPED_TEST(AutodiffCollectives, AllReduceMaxRoutesToTheHolder) {
  using AD = Tensor<Autodiff<TypeParam>>;
  auto max =
      this->Run({{1, 9}, {5, 9}}, [&](int r, const AD& x) { return *this->group_.AllReduce(r, x, ReduceOp::kMax); });
  EXPECT_EQ(max[0].first, (std::vector<double>{5, 9}));
  EXPECT_EQ(max[0].second, (std::vector<double>{0, 1}));  // a tie shares the summed gradient 2
  EXPECT_EQ(max[1].second, (std::vector<double>{2, 1}));
}

TYPED_TEST(AutodiffCollectives, AllGatherAndReduceScatterAreEachOthersBackward) {
  using AD = Tensor<Autodiff<TypeParam>>;
  // Member r's loss weights the gathered [4] vector by (r + 1): d/dx = reduce_scatter of those.
  auto gathered =
      this->Run({{1, 2}, {3, 4}}, [&](int r, const AD& x) { return *this->group_.AllGather(r, x) * (r + 1.0); });
  EXPECT_EQ(gathered[0].first, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(gathered[0].second, (std::vector<double>{3, 3}));  // 1 + 2 for each element
  EXPECT_EQ(gathered[1].second, (std::vector<double>{3, 3}));
  auto scattered = this->Run({{1, 2, 3, 4}, {10, 20, 30, 40}}, [&](int r, const AD& x) {
    return *this->group_.ReduceScatter(r, x, ReduceOp::kSum) * (r + 1.0);
  });
  EXPECT_EQ(scattered[0].first, (std::vector<double>{11, 22}));
  EXPECT_EQ(scattered[1].first, (std::vector<double>{66, 88}));  // [33, 44] * 2
  // Each input element reaches exactly one member's output, weighted by that member.
  EXPECT_EQ(scattered[0].second, (std::vector<double>{1, 1, 2, 2}));
  EXPECT_EQ(scattered[1].second, (std::vector<double>{1, 1, 2, 2}));
}

TYPED_TEST(AutodiffCollectives, ReduceScatterOfAnExtremeIsNotDifferentiable) {
  using AD = Tensor<Autodiff<TypeParam>>;
  const AD x = AD::ones({2}, DType::kF64, this->devices_[0]).require_grad();
  const auto s = this->group_.ReduceScatter(0, x, ReduceOp::kMax);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.status().message(), "reduce_scatter(max) is not differentiable in kiln; use sum or mean");
}

TYPED_TEST(AutodiffCollectives, BroadcastBackwardReducesToTheRoot) {
  using AD = Tensor<Autodiff<TypeParam>>;
  auto b =
      this->Run({{1, 2}, {7, 7}}, [&](int r, const AD& x) { return *this->group_.Broadcast(r, x, 0) * (r + 1.0); });
  EXPECT_EQ(b[1].first, (std::vector<double>{2, 4}));
  EXPECT_EQ(b[0].second, (std::vector<double>{3, 3}));  // 1 + 2
  EXPECT_EQ(b[1].second, (std::vector<double>{0, 0}));
}

}  // namespace
}  // namespace kiln::distributed
