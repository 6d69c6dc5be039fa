// Activation checkpointing inside a DataParallel step: gradient sync's per-parameter hooks
// fire once each with the final gradient, so a GPT with recomputed blocks trains on two
// devices to exactly the parameters (and random streams) of the same run without recompute.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "distributed/data_parallel.h"
#include "distributed/device_group.h"
#include "nn/functional.h"
#include "nn/gpt.h"
#include "nn/optim.h"
#include "tests/backends.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::ConfigNames;
using ::kiln::testing::DistributedBackends;
using ::kiln::testing::TestDevices;

template <class B>
class RecomputeDataParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_IF_UNAVAILABLE(B);
    KILN_SKIP_IF_FEWER_DEVICES(B, 2);
  }
};
TYPED_TEST_SUITE(RecomputeDataParallelTest, DistributedBackends, ConfigNames);

struct Trained {
  std::vector<double> losses;
  std::vector<std::vector<double>> parameters;  // every replica's, flattened
  std::vector<uint64_t> generators;
};

template <class B>
Trained Train(bool recompute) {
  using ADB = Autodiff<B>;
  using AD = Tensor<ADB>;
  const auto d = TestDevices<B>::Provide(2);
  Generator gen(7);
  const Gpt<ADB> model(
      {.vocab = 11, .context = 5, .layers = 2, .heads = 2, .width = 8, .dropout = 0.2, .recompute = recompute}, gen,
      d[0]);
  auto dp = distributed::DataParallel<B>::Create(
      model, std::make_shared<distributed::DeviceGroup<ADB>>(d),
      [] { return std::make_unique<AdamW<B>>(0.01, AdamWOptions{.weight_decay = 0.1}); }, {.bucket_bytes = 512});
  EXPECT_TRUE(dp.ok()) << dp.status();
  const auto loss = [](Module<ADB>& m, const AD& x, const AD& y) {
    return functional::cross_entropy(m(x).reshape({-1, 11}), y.reshape({-1}));
  };
  Trained out;
  for (int step = 0; step < 3; ++step) {
    Generator data(70 + step);
    const auto x = Tensor<B>::uniform({4, 5}, 0, 11, data, DType::kF32, d[0]).to(DType::kI64);
    const auto y = Tensor<B>::uniform({4, 5}, 0, 11, data, DType::kF32, d[0]).to(DType::kI64);
    const auto l = (*dp)->Step(x, y, loss);
    EXPECT_TRUE(l.ok()) << l.status();
    out.losses.push_back(l.ok() ? *l : 0);
  }
  for (int r = 0; r < (*dp)->size(); ++r) {
    std::vector<double> flat;
    for (auto& [name, p] : (*dp)->replica(r).named_parameters()) {
      for (double v : p->to_data().ToDoubles()) flat.push_back(v);
    }
    out.parameters.push_back(std::move(flat));
  }
  const auto states = (*dp)->GeneratorStates();
  EXPECT_TRUE(states.ok()) << states.status();
  if (states.ok()) out.generators = *states;
  return out;
}

TYPED_TEST(RecomputeDataParallelTest, TrainsExactlyAsWithoutRecomputeOn2Devices) {
  const Trained stored = Train<TypeParam>(false), recomputed = Train<TypeParam>(true);
  EXPECT_EQ(recomputed.losses, stored.losses);
  ASSERT_EQ(recomputed.parameters.size(), 2u);
  EXPECT_EQ(recomputed.parameters, stored.parameters);
  EXPECT_EQ(recomputed.generators, stored.generators);
}

}  // namespace
}  // namespace kiln::nn
