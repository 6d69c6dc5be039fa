#include <gtest/gtest.h>
#include <thread>
#include "backends/vulkan/vulkan_backend.h"
namespace kiln { namespace {
using T = Tensor<Vulkan>;
TEST(Smoke, Basics) {
  ASSERT_TRUE(vulkan::Available().ok()) << vulkan::Available();
  auto a = T::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  auto b = T::from_vector(std::vector<float>{10, 20, 30}, {3});
  EXPECT_EQ((a + b).to_data().ToDoubles(), (std::vector<double>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(a.sum().to_data().ToDoubles(), (std::vector<double>{21}));
  EXPECT_EQ(a.sum({1}).to_data().ToDoubles(), (std::vector<double>{6, 15}));
  EXPECT_EQ(a.sum({0}).to_data().ToDoubles(), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(a.matmul(a.transpose(0, 1)).to_data().ToDoubles(), (std::vector<double>{14, 32, 32, 77}));
  EXPECT_EQ(a.transpose(0, 1).reshape({6}).to_data().ToDoubles(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(a.argmax(1).to_data().ToDoubles(), (std::vector<double>{2, 2}));
  EXPECT_EQ(a.gt(T::full({1}, 3.0, DType::kF32)).to_data().ToDoubles(), (std::vector<double>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(a.to(DType::kI64).to_data().ToDoubles(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  auto big = T::ones({1 << 20}, DType::kF32);
  EXPECT_EQ(big.sum().to_data().ToDoubles(), (std::vector<double>{1 << 20}));
  auto d = T::from_vector(std::vector<double>{0.5, 1, 2}, {3});
  auto e = d.exp().to_data().ToDoubles();
  EXPECT_NEAR(e[0], std::exp(0.5), 1e-15);
  EXPECT_NEAR(d.log().to_data().ToDoubles()[2], std::log(2.0), 1e-15);
}
}}
namespace kiln { namespace {
TEST(Smoke, TwoDevices) {
  ASSERT_TRUE(vulkan::Configure({.virtual_devices = 2}).ok());
  for (int i = 0; i < 20; ++i) {
    auto x = T::full({3}, double(i), DType::kF64, VulkanDevice(1));
    EXPECT_EQ(x.to_data().ToDoubles(), std::vector<double>(3, i)) << i;
    auto y = T::full({3}, double(i), DType::kF64, VulkanDevice(0));
    EXPECT_EQ(y.to_data().ToDoubles(), std::vector<double>(3, i)) << i;
  }
}
TEST(Smoke, TwoThreads) {
  ASSERT_TRUE(vulkan::Configure({.virtual_devices = 2}).ok());
  std::vector<std::thread> ts;
  for (int d = 0; d < 2; ++d) ts.emplace_back([d] {
    for (int i = 0; i < 50; ++i) {
      auto x = T::full({3}, double(i + d), DType::kF64, VulkanDevice(d));
      EXPECT_EQ(x.to_data().ToDoubles(), std::vector<double>(3, i + d)) << i << " " << d;
    }
  });
  for (auto& t : ts) t.join();
}
}}
