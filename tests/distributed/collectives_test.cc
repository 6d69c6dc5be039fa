// In-process collectives on CPU devices: values against a reference, bit-identical members,
// both ways in, shape mismatches, wrong devices and the deadline.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "distributed/device_group.h"

namespace kiln::distributed {
namespace {

using T = Tensor<Cpu>;

class Collectives : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cpu::Configure({.devices = 3, .threads_per_device = 1}).ok()); }
  static std::vector<T> Inputs(int n, Shape shape, uint64_t seed = 1) {
    std::vector<T> out;
    Generator gen(seed);
    for (int r = 0; r < n; ++r) out.push_back(T::uniform(shape, -1, 1, gen, DType::kF32, CpuDevice(r)));
    return out;
  }
  static std::vector<double> V(const T& t) { return t.to_data().ToDoubles(); }
};

TEST_F(Collectives, AllReduceEveryKind) {
  DeviceGroup<Cpu> group({CpuDevice(0), CpuDevice(1), CpuDevice(2)});
  const auto in = Inputs(3, {5, 7001});  // chunks of an odd size across members
  for (ReduceKind kind : {ReduceKind::kSum, ReduceKind::kMean, ReduceKind::kMax, ReduceKind::kMin}) {
    SCOPED_TRACE(ReduceKindName(kind));
    auto out = group.AllReduce(in, kind);
    ASSERT_TRUE(out.ok()) << out.status();
    const auto a = V(in[0]), b = V(in[1]), c = V(in[2]);
    const auto got = V((*out)[0]);
    for (size_t i = 0; i < got.size(); ++i) {
      double want = 0;
      switch (kind) {
        case ReduceKind::kSum: want = static_cast<float>(static_cast<float>(a[i] + b[i]) + c[i]); break;
        case ReduceKind::kMean: want = static_cast<float>(static_cast<float>(static_cast<float>(a[i] + b[i]) + c[i]) / 3.0f); break;
        case ReduceKind::kMax: want = std::max({a[i], b[i], c[i]}); break;
        case ReduceKind::kMin: want = std::min({a[i], b[i], c[i]}); break;
      }
      ASSERT_EQ(got[i], want) << i;
    }
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ((*out)[r].device(), CpuDevice(r));
      EXPECT_EQ(V((*out)[r]), got);  // bit-identical on every member
    }
  }
}

TEST_F(Collectives, DeterministicAcrossRuns) {
  DeviceGroup<Cpu> group({CpuDevice(0), CpuDevice(1)});
  const auto in = Inputs(2, {100000});
  const auto first = V((*group.AllReduce(in, ReduceKind::kSum))[1]);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(V((*group.AllReduce(in, ReduceKind::kSum))[0]), first);
}

TEST_F(Collectives, PerDeviceCallsFromEachMembersThread) {
  DeviceGroup<Cpu> group({CpuDevice(0), CpuDevice(1)});
  std::vector<std::vector<double>> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      for (int step = 0; step < 50; ++step) {
        const T x = T::full({3}, r + step, DType::kF64, CpuDevice(r));
        auto y = group.AllReduce(r, x, ReduceKind::kSum, "step");
        ASSERT_TRUE(y.ok()) << y.status();
        if (step == 49) results[r] = V(*y);
        ASSERT_EQ(V(*y), std::vector<double>(3, 1 + 2.0 * step));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(results[0], results[1]);
}

TEST_F(Collectives, BroadcastGatherScatter) {
  DeviceGroup<Cpu> group({CpuDevice(0), CpuDevice(1), CpuDevice(2)});
  std::vector<T> in;
  for (int r = 0; r < 3; ++r) {
    in.push_back(T::from_vector(std::vector<double>{10.0 * r, 10.0 * r + 1, 10.0 * r + 2,
                                                    10.0 * r + 3, 10.0 * r + 4, 10.0 * r + 5}, {3, 2}, CpuDevice(r)));
  }
  auto b = group.Broadcast(in, 1);
  ASSERT_TRUE(b.ok());
  for (int r = 0; r < 3; ++r) EXPECT_EQ(V((*b)[r]), V(in[1]));
  auto g = group.AllGather(in);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)[2].shape(), Shape({9, 2}));
  EXPECT_EQ(V((*g)[2]).front(), 0);
  EXPECT_EQ(V((*g)[0]).back(), 25);
  auto s = group.ReduceScatter(in, ReduceKind::kSum);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(V((*s)[0]), (std::vector<double>{30, 33}));  // row 0 summed: 0+10+20, 1+11+21
  EXPECT_EQ(V((*s)[2]), (std::vector<double>{42, 45}));
  EXPECT_EQ(group.ReduceScatter(Inputs(3, {4, 2}), ReduceKind::kSum).status().message(),
            "reduce_scatter: dim 0 of f32[4,2] on cpu:0 must divide into 3 equal parts");
}

TEST_F(Collectives, MismatchedShapesFailForEveryMember) {
  DeviceGroup<Cpu> group({CpuDevice(0), CpuDevice(1)});
  std::vector<absl::Status> statuses(2);
  std::thread other([&] {
    statuses[1] = group.AllReduce(1, T::zeros({4}, DType::kF32, CpuDevice(1)), ReduceKind::kSum).status();
  });
  statuses[0] = group.AllReduce(0, T::zeros({3}, DType::kF32, CpuDevice(0)), ReduceKind::kSum).status();
  other.join();
  for (const auto& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              "collective members disagree: member 0 called all_reduce(sum) of f32[3] but member 1 "
              "called all_reduce(sum) of f32[4]; every member must make the same call with tensors "
              "of one shape and dtype");
  }
  // The group still works after a rejected call.
  EXPECT_TRUE(group.AllReduce(Inputs(2, {4}), ReduceKind::kSum).ok());
}

TEST_F(Collectives, WrongDeviceOrRankIsRejected) {
  DeviceGroup<Cpu> group({CpuDevice(0), CpuDevice(1)});
  EXPECT_EQ(group.AllReduce(1, T::zeros({2}), ReduceKind::kSum).status().message(),
            "member 1 is cpu:1 but its tensor f32[2] on cpu:0 is not; move it with .to(device)");
  EXPECT_EQ(group.AllReduce(2, T::zeros({2}), ReduceKind::kSum).status().message(),
            "rank 2 is not a member of a group of 2");
  EXPECT_EQ(group.AllReduce(Inputs(1, {2}), ReduceKind::kSum).status().message(),
            "a list call needs one tensor per member: got 1 for a group of 2");
}

TEST_F(Collectives, AMemberThatNeverArrivesIsADeadlineNotAHang) {
  DeviceGroup<Cpu> group({CpuDevice(0), CpuDevice(1), CpuDevice(2)}, {.timeout = std::chrono::milliseconds(200)});
  std::vector<absl::Status> statuses(2);
  const auto start = std::chrono::steady_clock::now();
  std::thread one([&] { statuses[1] = group.AllReduce(1, T::zeros({2}, DType::kF32, CpuDevice(1)), ReduceKind::kSum).status(); });
  statuses[0] = group.AllReduce(0, T::zeros({2}), ReduceKind::kSum).status();
  one.join();
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_LT(waited, std::chrono::seconds(2));
  for (const auto& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(s.message(), "collective arrival: member(s) 2 of 3 did not arrive within 200 ms; the "
                           "group is unusable from now on");
  }
  // The late member, and everyone after, gets the same error at once.
  EXPECT_EQ(group.AllReduce(2, T::zeros({2}, DType::kF32, CpuDevice(2)), ReduceKind::kSum).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace kiln::distributed
