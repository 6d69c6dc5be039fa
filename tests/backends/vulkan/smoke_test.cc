#include <gtest/gtest.h>
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
