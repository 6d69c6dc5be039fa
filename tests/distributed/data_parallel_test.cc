// DataParallel: N replicas trained on split batches end where one model trained on the whole
// batch ends, and stay bit-identical to each other after every step.
#include "distributed/data_parallel.h"

#include <gtest/gtest.h>

#include "distributed/group.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"

namespace kiln::distributed {
namespace {

using ADB = Autodiff<Cpu>;
using AD = Tensor<ADB>;

std::unique_ptr<nn::Sequential<ADB>> Model(Generator& gen) {
  auto m = std::make_unique<nn::Sequential<ADB>>();
  m->add<nn::Linear<ADB>>(4, 8, gen, nn::LinearOptions{.dtype = DType::kF64})
      .add<nn::GELU<ADB>>()
      .add<nn::Linear<ADB>>(8, 3, gen, nn::LinearOptions{.dtype = DType::kF64});
  return m;
}

std::vector<double> Flat(nn::Module<ADB>& m) {
  std::vector<double> out;
  for (auto& [name, p] : m.named_parameters()) {
    for (double v : p->to_data().ToDoubles()) out.push_back(v);
  }
  return out;
}

AD Loss(nn::Module<ADB>& m, const AD& x, const AD& y) { return nn::CrossEntropy(m(x), y); }

class DataParallelTest : public ::testing::TestWithParam<std::pair<int, int64_t>> {};

TEST_P(DataParallelTest, MatchesSingleDeviceTrainingOnTheWholeBatch) {
  const auto [devices, batch] = GetParam();
  ASSERT_TRUE(cpu::Configure({.devices = devices, .threads_per_device = 1}).ok());
  Generator gen(5);
  auto model = Model(gen);
  auto single = model->clone();
  nn::Sgd<Cpu> single_opt(0.1, {.momentum = 0.9});

  std::vector<DispatchDevice> list;
  for (int r = 0; r < devices; ++r) list.push_back(DispatchDevice::Autodiff(CpuDevice(r)));
  auto group = MakeGroup(list, GroupOp::kGradientSync);
  ASSERT_TRUE(group.ok()) << group.status();
  auto dp = DataParallel<Cpu>::Create(
      *model, std::get<std::shared_ptr<DeviceGroup<ADB>>>(*group),
      [] { return std::make_unique<nn::Sgd<Cpu>>(0.1, nn::SgdOptions{.momentum = 0.9}); },
      {.bucket_bytes = 256});
  ASSERT_TRUE(dp.ok()) << dp.status();

  for (int step = 0; step < 6; ++step) {
    Generator data(50 + step);
    const auto x = Tensor<Cpu>::uniform({batch, 4}, -2, 2, data, DType::kF64);
    const auto y = Tensor<Cpu>::uniform({batch}, 0, 3, data, DType::kF64).to(DType::kI64);
    auto loss = (*dp)->Step(x, y, Loss);
    ASSERT_TRUE(loss.ok()) << loss.status();
    const AD l = Loss(*single, AD::from_inner(x), AD::from_inner(y));
    EXPECT_NEAR(*loss, l.item<double>(), 1e-12);
    single_opt.step(*single, l.backward());

    const auto reference = Flat(*single);
    const auto first = Flat((*dp)->replica(0));
    for (size_t i = 0; i < reference.size(); ++i) {
      ASSERT_NEAR(first[i], reference[i], 1e-12 * (1 + std::abs(reference[i]))) << "step " << step;
    }
    for (int r = 1; r < devices; ++r) ASSERT_EQ(Flat((*dp)->replica(r)), first) << "replica " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DataParallelTest,
                         ::testing::Values(std::make_pair(2, int64_t{12}), std::make_pair(3, int64_t{13}),
                                           std::make_pair(4, int64_t{16})));

TEST(DataParallel, RejectsABatchTooSmallToSplit) {
  ASSERT_TRUE(cpu::Configure({.devices = 2}).ok());
  Generator gen(6);
  auto model = Model(gen);
  auto group = std::make_shared<DeviceGroup<ADB>>(std::vector<CpuDevice>{CpuDevice(0), CpuDevice(1)});
  auto dp = DataParallel<Cpu>::Create(*model, group, [] { return std::make_unique<nn::Sgd<Cpu>>(0.1); });
  ASSERT_TRUE(dp.ok());
  const auto x = Tensor<Cpu>::zeros({1, 4}, DType::kF64);
  EXPECT_EQ((*dp)->Step(x, Tensor<Cpu>::zeros({1}, DType::kI64), Loss).status().message(),
            "DataParallel: a batch of 1 samples (labels: 1) cannot be split over 2 devices");
}

}  // namespace
}  // namespace kiln::distributed
