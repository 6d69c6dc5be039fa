// In-process collectives on every backend with collective kernels: values against a host
// reference, bit-identical members, both ways in, shape mismatches, wrong devices and the
// deadline.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/device_group.h"
#include "tests/backends.h"

namespace kiln::distributed {
namespace {

using ::kiln::testing::ConfigNames;
using ::kiln::testing::DistributedBackends;
using ::kiln::testing::TestDevices;

template <class B>
class Collectives : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_IF_UNAVAILABLE(B);
    KILN_SKIP_IF_FEWER_DEVICES(B, ::kiln::testing::kDistributedDevices);
  }
  using T = Tensor<B>;
  using Device = typename B::Device;

  // Member r's input on devices[r], one per device given.
  static std::vector<T> Inputs(const std::vector<Device>& devices, Shape shape, uint64_t seed = 1) {
    std::vector<T> out;
    Generator gen(seed);
    for (const Device& d : devices) out.push_back(T::uniform(shape, -1, 1, gen, DType::kF32, d));
    return out;
  }
  static std::vector<double> V(const T& t) { return t.to_data().ToDoubles(); }
};
TYPED_TEST_SUITE(Collectives, DistributedBackends, ConfigNames);

TYPED_TEST(Collectives, AllReduceEveryKind) {
  // 2 and 3 members: the host reduction folds a mean's division into its last pass, which
  // differs between the two.
  for (int members : {2, 3}) {
    SCOPED_TRACE(members);
    const auto d = TestDevices<TypeParam>::Provide(members);
    DeviceGroup<TypeParam> group(d);
    const auto in = this->Inputs(d, {5, 7001});  // chunks of an odd size across members
    for (ReduceOp kind : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
      SCOPED_TRACE(OpName(kind));
      auto out = group.AllReduce(in, kind);
      ASSERT_TRUE(out.ok()) << out.status();
      std::vector<std::vector<double>> v;
      for (const auto& t : in) v.push_back(this->V(t));
      const auto got = this->V((*out)[0]);
      // f32 in member order, as every backend reduces (on the device or staged on the host).
      for (size_t i = 0; i < got.size(); ++i) {
        float want = static_cast<float>(v[0][i]);
        for (int m = 1; m < members; ++m) {
          const float x = static_cast<float>(v[m][i]);
          switch (kind) {
            case ReduceOp::kSum:
            case ReduceOp::kMean: want = want + x; break;
            case ReduceOp::kMax: want = std::max(want, x); break;
            case ReduceOp::kMin: want = std::min(want, x); break;
          }
        }
        if (kind == ReduceOp::kMean) want = want / static_cast<float>(members);
        ASSERT_EQ(got[i], static_cast<double>(want)) << i;
      }
      for (int r = 0; r < members; ++r) {
        EXPECT_EQ((*out)[r].device(), d[r]);
        EXPECT_EQ(this->V((*out)[r]), got);  // bit-identical on every member
      }
    }
  }
}

TYPED_TEST(Collectives, DeterministicAcrossRuns) {
  DeviceGroup<TypeParam> group(TestDevices<TypeParam>::Provide(2));
  const auto in = this->Inputs(group.devices(), {100000});
  const auto first = this->V((*group.AllReduce(in, ReduceOp::kSum))[1]);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(this->V((*group.AllReduce(in, ReduceOp::kSum))[0]), first);
}

TYPED_TEST(Collectives, PerDeviceCallsFromEachMembersThread) {
  using T = Tensor<TypeParam>;
  const auto d = TestDevices<TypeParam>::Provide(2);
  DeviceGroup<TypeParam> group(d);
  std::vector<std::vector<double>> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      for (int step = 0; step < 50; ++step) {
        const T x = T::full({3}, r + step, DType::kF64, d[r]);
        auto y = group.AllReduce(r, x, ReduceOp::kSum, "step");
        ASSERT_TRUE(y.ok()) << y.status();
        if (step == 49) results[r] = this->V(*y);
        ASSERT_EQ(this->V(*y), std::vector<double>(3, 1 + 2.0 * step));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(results[0], results[1]);
}

TYPED_TEST(Collectives, BroadcastGatherScatter) {
  using T = Tensor<TypeParam>;
  const auto d = TestDevices<TypeParam>::Provide(3);
  DeviceGroup<TypeParam> group(d);
  std::vector<T> in;
  for (int r = 0; r < 3; ++r) {
    in.push_back(T::from_vector(
        std::vector<double>{10.0 * r, 10.0 * r + 1, 10.0 * r + 2, 10.0 * r + 3, 10.0 * r + 4, 10.0 * r + 5}, {3, 2},
        d[r]));
  }
  auto b = group.Broadcast(in, 1);
  ASSERT_TRUE(b.ok());
  for (int r = 0; r < 3; ++r) EXPECT_EQ(this->V((*b)[r]), this->V(in[1]));
  auto g = group.AllGather(in);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)[2].shape(), Shape({9, 2}));
  EXPECT_EQ(this->V((*g)[2]).front(), 0);
  EXPECT_EQ(this->V((*g)[0]).back(), 25);
  auto s = group.ReduceScatter(in, ReduceOp::kSum);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(this->V((*s)[0]), (std::vector<double>{30, 33}));  // row 0 summed: 0+10+20, 1+11+21
  EXPECT_EQ(this->V((*s)[2]), (std::vector<double>{42, 45}));
  EXPECT_EQ(group.ReduceScatter(this->Inputs(d, {4, 2}), ReduceOp::kSum).status().message(),
            absl::StrCat("reduce_scatter: dim 0 of f32[4,2] on ", d[0].ToString(), " must divide into 3 equal parts"));
}

TYPED_TEST(Collectives, MismatchedShapesFailForEveryMember) {
  using T = Tensor<TypeParam>;
  const auto d = TestDevices<TypeParam>::Provide(2);
  DeviceGroup<TypeParam> group(d);
  std::vector<absl::Status> statuses(2);
  std::thread other(
      [&] { statuses[1] = group.AllReduce(1, T::zeros({4}, DType::kF32, d[1]), ReduceOp::kSum).status(); });
  statuses[0] = group.AllReduce(0, T::zeros({3}, DType::kF32, d[0]), ReduceOp::kSum).status();
  other.join();
  for (const auto& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              "collective members disagree: member 0 called all_reduce(sum) of f32[3] but member 1 "
              "called all_reduce(sum) of f32[4]; every member must make the same call with tensors "
              "of one shape and dtype; flight recorder: member 0 is in all_reduce(sum) of f32[3] (seq 0); "
              "member 1 is in all_reduce(sum) of f32[4] (seq 0) (set KILN_FLIGHT_RECORDER_DIR to dump "
              "every member's last calls)");
  }
  // The group still works after a rejected call.
  EXPECT_TRUE(group.AllReduce(this->Inputs(d, {4}), ReduceOp::kSum).ok());
}

TYPED_TEST(Collectives, WrongDeviceOrRankIsRejected) {
  using T = Tensor<TypeParam>;
  const auto d = TestDevices<TypeParam>::Provide(2);
  DeviceGroup<TypeParam> group(d);
  EXPECT_EQ(group.AllReduce(1, T::zeros({2}, DType::kF32, d[0]), ReduceOp::kSum).status().message(),
            absl::StrCat("member 1 is ", d[1].ToString(), " but its tensor f32[2] on ", d[0].ToString(),
                         " is not; move it with .to(device)"));
  EXPECT_EQ(group.AllReduce(2, T::zeros({2}, DType::kF32, d[0]), ReduceOp::kSum).status().message(),
            "rank 2 is not a member of a group of 2");
  EXPECT_EQ(group.AllReduce(this->Inputs({d[0]}, {2}), ReduceOp::kSum).status().message(),
            "a list call needs one tensor per member: got 1 for a group of 2");
}

TYPED_TEST(Collectives, AMemberThatNeverArrivesIsADeadlineNotAHang) {
  using T = Tensor<TypeParam>;
  const auto d = TestDevices<TypeParam>::Provide(3);
  DeviceGroup<TypeParam> group(d, {.timeout = std::chrono::milliseconds(200)});
  std::vector<absl::Status> statuses(2);
  const auto start = std::chrono::steady_clock::now();
  std::thread one([&] { statuses[1] = group.AllReduce(1, T::zeros({2}, DType::kF32, d[1]), ReduceOp::kSum).status(); });
  statuses[0] = group.AllReduce(0, T::zeros({2}, DType::kF32, d[0]), ReduceOp::kSum).status();
  one.join();
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_LT(waited, std::chrono::seconds(2));
  for (const auto& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(s.message(),
              "collective arrival: member(s) 2 of 3 did not arrive within 200 ms; the "
              "group is unusable from now on; flight recorder: member 2 has made no call; members 0, 1 are "
              "waiting in all_reduce(sum) of f32[2] (seq 0) (set KILN_FLIGHT_RECORDER_DIR to dump every "
              "member's last calls)");
  }
  // The late member, and everyone after, gets the same error at once.
  EXPECT_EQ(group.AllReduce(2, T::zeros({2}, DType::kF32, d[2]), ReduceOp::kSum).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace kiln::distributed
