// DataParallel, on every backend with collective kernels: N replicas trained on split batches
// end where one model trained on the whole batch ends, and stay bit-identical to each other
// after every step.
#include "distributed/data_parallel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "distributed/group.h"
#include "nn/activation.h"
#include "nn/functional.h"
#include "nn/gpt.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"
#include "tests/backends.h"

namespace kiln::distributed {
namespace {

using ::kiln::testing::ConfigNames;
using ::kiln::testing::DistributedBackends;
using ::kiln::testing::TestDevices;

template <class B>
std::unique_ptr<nn::Sequential<Autodiff<B>>> Model(Generator& gen, const typename B::Device& device) {
  using ADB = Autodiff<B>;
  auto m = std::make_unique<nn::Sequential<ADB>>();
  m->template add<nn::Linear<ADB>>(4, 8, gen, nn::LinearOptions{.dtype = DType::kF64}, device)
      .template add<nn::GELU<ADB>>()
      .template add<nn::Linear<ADB>>(8, 3, gen, nn::LinearOptions{.dtype = DType::kF64}, device);
  return m;
}

template <class B>
std::vector<double> Flat(nn::Module<Autodiff<B>>& m) {
  std::vector<double> out;
  for (auto& [name, p] : m.named_parameters()) {
    for (double v : p->to_data().ToDoubles()) out.push_back(v);
  }
  return out;
}

template <class B>
Tensor<Autodiff<B>> Loss(nn::Module<Autodiff<B>>& m, const Tensor<Autodiff<B>>& x, const Tensor<Autodiff<B>>& y) {
  return nn::CrossEntropy(m(x), y);
}

// Trains on `devices` devices (reached through MakeGroup, as --devices is) and on one device,
// from the same start on the same global batches of `batch` samples.
template <class B>
void ExpectMatchesSingleDevice(int devices, int64_t batch, double clip = 0) {
  using ADB = Autodiff<B>;
  using AD = Tensor<ADB>;
  const auto d = TestDevices<B>::Provide(devices);
  Generator gen(5);
  auto model = Model<B>(gen, d[0]);
  auto single = model->clone();
  nn::Sgd<B> single_opt(0.1, {.momentum = 0.9});

  std::vector<DispatchDevice> list;
  for (int r = 0; r < devices; ++r) list.push_back(DispatchDevice::Autodiff(DispatchDevice(d[r])));
  auto group = MakeGroup(list, Collective::kGradientSync);
  ASSERT_TRUE(group.ok()) << group.status();
  auto dp = DataParallel<B>::Create(*model, std::get<std::shared_ptr<DeviceGroup<ADB>>>(*group),
                                    [] { return std::make_unique<nn::Sgd<B>>(0.1, nn::SgdOptions{.momentum = 0.9}); },
                                    {.bucket_bytes = 256});
  ASSERT_TRUE(dp.ok()) << dp.status();
  if (clip > 0) (*dp)->set_clip_grad_norm(clip);

  for (int step = 0; step < 6; ++step) {
    Generator data(50 + step);
    const auto x = Tensor<B>::uniform({batch, 4}, -2, 2, data, DType::kF64, d[0]);
    const auto y = Tensor<B>::uniform({batch}, 0, 3, data, DType::kF64, d[0]).to(DType::kI64);
    auto loss = (*dp)->Step(x, y, Loss<B>);
    ASSERT_TRUE(loss.ok()) << loss.status();
    const AD l = Loss<B>(*single, AD::from_inner(x), AD::from_inner(y));
    EXPECT_NEAR(*loss, l.template item<double>(), 1e-12);
    auto grads = l.backward();
    if (clip > 0) {
      EXPECT_GT(nn::ClipGradNorm(*single, grads, clip), clip) << "clipping must be active here";
    }
    single_opt.step(*single, grads);

    const auto reference = Flat<B>(*single);
    const auto first = Flat<B>((*dp)->replica(0));
    for (size_t i = 0; i < reference.size(); ++i) {
      ASSERT_NEAR(first[i], reference[i], 1e-12 * (1 + std::abs(reference[i]))) << "step " << step;
    }
    for (int r = 1; r < devices; ++r) ASSERT_EQ(Flat<B>((*dp)->replica(r)), first) << "replica " << r;
  }
}

template <class B>
class DataParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_IF_UNAVAILABLE(B);
    KILN_SKIP_IF_FEWER_DEVICES(B, ::kiln::testing::kDistributedDevices);
  }
};
TYPED_TEST_SUITE(DataParallelTest, DistributedBackends, ConfigNames);

TYPED_TEST(DataParallelTest, MatchesSingleDeviceTrainingOn2Devices) { ExpectMatchesSingleDevice<TypeParam>(2, 12); }

TYPED_TEST(DataParallelTest, MatchesSingleDeviceTrainingOn3DevicesWithUnevenShards) {
  ExpectMatchesSingleDevice<TypeParam>(3, 13);
}

TYPED_TEST(DataParallelTest, MatchesSingleDeviceTrainingOn4Devices) { ExpectMatchesSingleDevice<TypeParam>(4, 16); }

// Clipping the synced gradients scales every replica by one factor: still bit-identical, and
// the single-device run clipped the same way.
TYPED_TEST(DataParallelTest, ClipsTheGlobalGradientNormLikeOneDevice) {
  ExpectMatchesSingleDevice<TypeParam>(3, 13, /*clip=*/0.05);
}

// A tied-embedding GPT (f64) trained data-parallel equals one device on the same global
// batches; replicas bit-identical after every step.
template <class B>
void ExpectGptMatchesSingleDevice(int devices) {
  using ADB = Autodiff<B>;
  using AD = Tensor<ADB>;
  const auto d = TestDevices<B>::Provide(devices);
  Generator gen(7);
  const nn::Gpt<ADB> model({.vocab = 11, .context = 5, .layers = 2, .heads = 2, .width = 4, .dtype = DType::kF64}, gen,
                           d[0]);
  auto single = model.clone();
  // SGD: Adam would divide roundoff-sized gradients by their own size and so magnify the
  // summation-order differences this compares.
  nn::Sgd<B> single_opt(0.1, {.momentum = 0.9});
  auto group = std::make_shared<DeviceGroup<ADB>>(d);
  auto dp = DataParallel<B>::Create(model, group,
                                    [] { return std::make_unique<nn::Sgd<B>>(0.1, nn::SgdOptions{.momentum = 0.9}); },
                                    {.bucket_bytes = 512});
  ASSERT_TRUE(dp.ok()) << dp.status();
  (*dp)->set_clip_grad_norm(0.5);
  const auto loss = [](nn::Module<ADB>& m, const AD& x, const AD& y) {
    const AD logits = m(x);
    return nn::functional::cross_entropy(logits.reshape({-1, 11}), y.reshape({-1}));
  };
  for (int step = 0; step < 4; ++step) {
    Generator data(70 + step);
    const auto x = Tensor<B>::uniform({6, 5}, 0, 11, data, DType::kF64, d[0]).to(DType::kI64);
    const auto y = Tensor<B>::uniform({6, 5}, 0, 11, data, DType::kF64, d[0]).to(DType::kI64);
    auto l = (*dp)->Step(x, y, loss);
    ASSERT_TRUE(l.ok()) << l.status();
    const AD ls = loss(*single, AD::from_inner(x), AD::from_inner(y));
    EXPECT_NEAR(*l, ls.template item<double>(), 1e-12);
    auto grads = ls.backward();
    nn::ClipGradNorm(*single, grads, 0.5);
    single_opt.step(*single, grads);
    const auto reference = Flat<B>(*single), first = Flat<B>((*dp)->replica(0));
    for (size_t i = 0; i < reference.size(); ++i) {
      ASSERT_NEAR(first[i], reference[i], 1e-12 * (1 + std::abs(reference[i]))) << "step " << step;
    }
    for (int r = 1; r < devices; ++r) ASSERT_EQ(Flat<B>((*dp)->replica(r)), first) << "replica " << r;
  }
}

TYPED_TEST(DataParallelTest, GptMatchesSingleDeviceOn2And3Devices) {
  ExpectGptMatchesSingleDevice<TypeParam>(2);
  ExpectGptMatchesSingleDevice<TypeParam>(3);
}

TYPED_TEST(DataParallelTest, RejectsABatchTooSmallToSplit) {
  using B = TypeParam;
  const auto d = TestDevices<B>::Provide(2);
  Generator gen(6);
  auto model = Model<B>(gen, d[0]);
  auto group = std::make_shared<DeviceGroup<Autodiff<B>>>(d);
  auto dp = DataParallel<B>::Create(*model, group, [] { return std::make_unique<nn::Sgd<B>>(0.1); });
  ASSERT_TRUE(dp.ok());
  const auto x = Tensor<B>::zeros({1, 4}, DType::kF64, d[0]);
  EXPECT_EQ((*dp)->Step(x, Tensor<B>::zeros({1}, DType::kI64, d[0]), Loss<B>).status().message(),
            "DataParallel: a batch of 1 samples (labels: 1) cannot be split over 2 devices");
}

// Loss scaling by a power of two is exact: scaled training ends bit-equal to unscaled training.
// An overflow on one member's shard skips the update on every replica and backs the scale off;
// growth_interval good steps grow it again.
TYPED_TEST(DataParallelTest, LossScalingIsExactAndOneOverflowSkipsTheStepEverywhere) {
  using B = TypeParam;
  using AD = Tensor<Autodiff<B>>;
  const auto d = TestDevices<B>::Provide(2);
  Generator gen(8);
  auto model = Model<B>(gen, d[0]);
  auto make = [&](bool scaled) {
    auto dp = DataParallel<B>::Create(*model, std::make_shared<DeviceGroup<Autodiff<B>>>(d), [] {
      return std::make_unique<nn::Sgd<B>>(0.1, nn::SgdOptions{.momentum = 0.9});
    });
    EXPECT_TRUE(dp.ok()) << dp.status();
    if (scaled) (*dp)->set_loss_scaler(nn::LossScalerOptions{.init_scale = 1024, .growth_interval = 2});
    return *std::move(dp);
  };
  auto plain = make(false), scaled = make(true);
  // poison: the loss of the shard on device 1 becomes inf at this step.
  int poison_step = 2;
  int step = 0;
  const auto loss = [&](nn::Module<Autodiff<B>>& m, const AD& x, const AD& y) {
    const AD l = Loss<B>(m, x, y);
    return step == poison_step && x.device() == d[1] ? l * INFINITY : l;
  };
  const std::vector<double> scales = {1024, 2048, 1024, 1024, 2048, 2048};  // after each step
  for (step = 0; step < 6; ++step) {
    Generator data(70 + step);
    const auto x = Tensor<B>::uniform({8, 4}, -2, 2, data, DType::kF64, d[0]);
    const auto y = Tensor<B>::uniform({8}, 0, 3, data, DType::kF64, d[0]).to(DType::kI64);
    const auto before = Flat<B>(scaled->replica(0));
    ASSERT_TRUE(scaled->Step(x, y, loss).ok());
    EXPECT_EQ(scaled->last_step_skipped(), step == poison_step);
    EXPECT_EQ(scaled->loss_scaler()->scale(), scales[step]) << "step " << step;
    EXPECT_EQ(Flat<B>(scaled->replica(1)), Flat<B>(scaled->replica(0)));
    if (step == poison_step) {
      EXPECT_EQ(Flat<B>(scaled->replica(0)), before) << "the overflowed step must change nothing";
      continue;
    }
    ASSERT_TRUE(plain->Step(x, y, Loss<B>).ok());
    EXPECT_EQ(Flat<B>(scaled->replica(0)), Flat<B>(plain->replica(0))) << "step " << step;
  }
  EXPECT_EQ(scaled->loss_scaler()->skipped_steps(), 1);
}

}  // namespace
}  // namespace kiln::distributed
