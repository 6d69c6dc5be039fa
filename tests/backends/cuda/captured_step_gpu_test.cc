// CapturedStep on a real GPU (skips without one): training through replays gives the numbers
// eager DataParallel steps give, and a group of two GPUs is refused. The fake-runtime test
// (captured_step_test) checks the bookkeeping; this one checks that the graph computes.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "distributed/captured_step.h"
#include "distributed/data_parallel.h"
#include "distributed/device_group.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"
#include "tests/backends.h"

namespace kiln::distributed {
namespace {

using AD = Autodiff<Cuda>;
using T = Tensor<Cuda>;

const auto kMse = [](nn::Module<AD>& m, const Tensor<AD>& xs, const Tensor<AD>& ys) {
  return nn::MeanSquaredError(m(xs), ys);
};

std::unique_ptr<DataParallel<Cuda>> MakeDp(std::vector<CudaDevice> devices) {
  Generator gen(1);
  nn::Sequential<AD> model;
  model.add<nn::Linear<AD>>(10, 64, gen).add<nn::ReLU<AD>>().add<nn::Linear<AD>>(64, 1, gen);
  auto dp = DataParallel<Cuda>::Create(model, std::make_shared<DeviceGroup<AD>>(std::move(devices)), [] {
    return std::make_unique<nn::Sgd<Cuda>>(0.05, nn::SgdOptions{.momentum = 0.9});
  });
  EXPECT_TRUE(dp.ok()) << dp.status();
  return *std::move(dp);
}

TEST(CapturedStepCuda, ReplaysTrainAsEagerStepsDo) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  auto eager = MakeDp({CudaDevice(0)});
  auto captured = MakeDp({CudaDevice(0)});
  auto step = CapturedStep::Create(*captured, kMse);
  ASSERT_TRUE(step.ok()) << step.status();
  Generator gen(3);
  std::vector<T> xs, ys;
  for (int i = 0; i < 3; ++i) {  // two shapes, and a batch that changes every step
    xs.push_back(T::uniform({i == 2 ? 48 : 32, 10}, -1, 1, gen));
    ys.push_back(T::uniform({i == 2 ? 48 : 32, 1}, -1, 1, gen));
  }
  for (int s = 0; s < 12; ++s) {
    const int b = s % 3;
    absl::StatusOr<double> want = eager->Step(xs[b], ys[b], kMse);
    absl::StatusOr<double> got = (*step)->Step(xs[b], ys[b]);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    EXPECT_NEAR(*got, *want, 1e-6 * std::max(1.0, std::abs(*want))) << "step " << s;
  }
  EXPECT_GT((*step)->stats().replays, 0);
  auto want = eager->replica(0).named_parameters();
  auto got = captured->replica(0).named_parameters();
  for (size_t i = 0; i < want.size(); ++i) {
    const std::vector<double> w = want[i].second->inner().to_data().ToDoubles();
    const std::vector<double> g = got[i].second->inner().to_data().ToDoubles();
    ASSERT_EQ(w.size(), g.size());
    for (size_t k = 0; k < w.size(); ++k) ASSERT_NEAR(g[k], w[k], 1e-5) << want[i].first << "[" << k << "]";
  }
}

TEST(CapturedStepCuda, TwoGpusAreRefused) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  KILN_SKIP_IF_FEWER_DEVICES(Cuda, 2);
  auto dp = MakeDp({CudaDevice(0), CudaDevice(1)});
  const absl::Status s = CapturedStep::Create(*dp, kMse).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(s.message(), "CapturedStep: a group of 2 devices over 1 process(es) is not captured"))
      << s;
}

}  // namespace
}  // namespace kiln::distributed
