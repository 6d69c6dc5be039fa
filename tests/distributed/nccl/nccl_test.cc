// NCCL communicators and DeviceGroup<Cuda>. Without a GPU: every entry point returns a clear
// status (never aborts). With one GPU: a one-member group runs every collective, which checks
// the plumbing (staging, streams, events, dtypes, integer mean); the multi-GPU behaviour is
// covered by tests/distributed, which skip below four GPUs.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "distributed/group.h"
#include "distributed/nccl/nccl_comm.h"

namespace kiln {
namespace {

using distributed::DeviceGroup;
using T = Tensor<Cuda>;

TEST(Nccl, WithoutAGpuEveryEntryPointIsAStatus) {
  if (cuda::Available().ok()) GTEST_SKIP() << "this machine has a GPU";
  const auto all = cuda::NcclComm::CreateAll({CudaDevice(0)}, std::chrono::seconds(30));
  EXPECT_EQ(all.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(all.status().message(), "cuda:0 does not exist: no CUDA device")) << all.status();
  const auto group = distributed::MakeGroup({DispatchDevice(CudaDevice(0))}, distributed::Collective::kAllReduce);
  EXPECT_EQ(group.status().code(), absl::StatusCode::kInvalidArgument) << group.status();
}

TEST(Nccl, JoinChecksItsArguments) {
  const auto second = std::chrono::seconds(1);
  EXPECT_EQ(cuda::NcclComm::Join("short", 0, 1, {CudaDevice(0)}, second).status().message(),
            "NCCL unique id: expected 128 bytes, got 5");
  const std::string id(128, '\0');
  EXPECT_EQ(cuda::NcclComm::Join(id, 2, 2, {CudaDevice(0)}, second).status().message(),
            "NCCL rank 2 is outside a world of 2");
  EXPECT_EQ(cuda::NcclComm::Join(id, 1, 2, {CudaDevice(0), CudaDevice(1)}, second).status().message(),
            "NCCL ranks 1..2 are outside a world of 2");
  EXPECT_EQ(cuda::NcclComm::Join(id, 0, 2, {}, second).status().message(), "NCCL: joining needs at least one device");
  EXPECT_EQ(cuda::NcclComm::Prepare(distributed::Collective::kAllReduce, {}, 2).status().message(),
            "NCCL: a collective needs at least one input");
  EXPECT_EQ(cuda::NcclComm::Run({}, distributed::Collective::kAllReduce, cuda::NcclBuffers{}).status().message(),
            "NcclComm::Run: one input per communicator");
}

class OneGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const absl::Status s = cuda::Available(); !s.ok()) GTEST_SKIP() << "no CUDA device: " << s.message();
  }
};

TEST_F(OneGpu, EveryCollectiveOnAOneMemberGroup) {
  DeviceGroup<Cuda> group({CudaDevice(0)});
  const T x = T::arange(0, 6, 1, DType::kF32).reshape({3, 2}).transpose(0, 1);  // a view
  for (ReduceOp kind : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
    auto r = group.AllReduce(0, x, kind);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->to_data().ToDoubles(), x.to_data().ToDoubles());
  }
  const T i = T::from_vector(std::vector<int64_t>{7, -7}, {2});
  auto mean = group.AllReduce(0, i, ReduceOp::kMean);  // sum, then an integer division
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(mean->to_data().ToDoubles(), (std::vector<double>{7, -7}));
  auto b = group.Broadcast(0, x, 0);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->to_data().ToDoubles(), x.to_data().ToDoubles());
  auto g = group.AllGather(0, x);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->shape(), Shape({2, 3}));
  auto s = group.ReduceScatter(0, x, ReduceOp::kSum);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->to_data().ToDoubles(), x.to_data().ToDoubles());
  // The list form (one NCCL group from one thread).
  const std::vector<T> list = {x};
  auto l = group.AllReduce(absl::MakeConstSpan(list), ReduceOp::kSum);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ((*l)[0].to_data().ToDoubles(), x.to_data().ToDoubles());
  // A result feeds straight into compute (the compute stream waits on its fence).
  EXPECT_EQ(((*l)[0] * 2).sum().item<double>(), 30);
}

TEST_F(OneGpu, ThroughMakeGroupWithGradients) {
  auto group = distributed::MakeGroup({DispatchDevice::Autodiff(DispatchDevice(CudaDevice(0)))},
                                      distributed::Collective::kGradientSync);
  ASSERT_TRUE(group.ok()) << group.status();
  auto& g = *std::get<std::shared_ptr<DeviceGroup<Autodiff<Cuda>>>>(*group);
  using AD = Tensor<Autodiff<Cuda>>;
  const AD w = AD::ones({3}, DType::kF64).require_grad();
  auto r = g.AllReduce(0, w * 2, ReduceOp::kSum);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto grads = r->sum().backward();
  EXPECT_EQ(grads.get(w)->to_data().ToDoubles(), (std::vector<double>{2, 2, 2}));
}

TEST_F(OneGpu, UniqueIdRoundTrip) {
  auto id = cuda::NcclComm::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  auto comm = cuda::NcclComm::Join(*id, 0, 1, {CudaDevice(0)}, std::chrono::seconds(30));
  ASSERT_TRUE(comm.ok()) << comm.status();
  auto out = cuda::NcclComm::Run({(*comm)[0].get()}, distributed::Collective::kAllReduce, {T::ones({4}).primitive()},
                                 ReduceOp::kSum);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(T((*out)[0]).sum().item<float>(), 4);
}

}  // namespace
}  // namespace kiln
