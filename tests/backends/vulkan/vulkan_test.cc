// What the typed suites cannot see: device enumeration and its errors, virtual devices,
// memory reuse, launches wider than one grid dimension, index checks that need no read-back,
// and Tensor<Dispatch> on Vulkan devices. Runs wherever a Vulkan device exists (lavapipe in CI).
#include <gtest/gtest.h>

#include <thread>

#include "backends/dispatch/dispatch_backend.h"
#include "backends/vulkan/context.h"
#include "backends/vulkan/vulkan_backend.h"
#include "tests/backends.h"

namespace kiln {
namespace {

using T = Tensor<Vulkan>;

class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_IF_UNAVAILABLE(Vulkan);
    ASSERT_TRUE(vulkan::Configure({.virtual_devices = 2}).ok());
  }
  static std::vector<double> V(const T& t) { return t.to_data().ToDoubles(); }
};

TEST_F(VulkanTest, DevicesAreListedAndMissingOnesNamed) {
  const auto count = vulkan::DeviceCount();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count % 2, 0);  // two virtual devices per physical one
  const auto name = vulkan::Describe(VulkanDevice(0));
  ASSERT_TRUE(name.ok());
  EXPECT_FALSE(name->empty());
  const absl::Status missing = vulkan::CheckDevice(VulkanDevice(*count));
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.message(),
            absl::StrCat("vulkan:", *count, " does not exist: this process has ", *count,
                         " Vulkan devices (vulkan:0..vulkan:", *count - 1,
                         "); set KILN_VULKAN_VIRTUAL_DEVICES or call kiln::vulkan::Configure for more"));
  EXPECT_EQ(vulkan::Configure({.virtual_devices = 0}).message(),
            "vulkan::Configure: virtual_devices must be in 1..64, got 0");
  try {
    (void)T::zeros({2}, DType::kF32, VulkanDevice(*count));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), missing);
  }
}

TEST_F(VulkanTest, VirtualDevicesHoldTheirOwnTensors) {
  const T a = T::from_vector(std::vector<float>{1, 2, 3}, {3}, VulkanDevice(0));
  const T b = a.to(VulkanDevice(1));
  EXPECT_EQ(b.device(), VulkanDevice(1));
  EXPECT_EQ(V(b * b), (std::vector<double>{1, 4, 9}));
  EXPECT_EQ(V(b.to(VulkanDevice(0)) + a), (std::vector<double>{2, 4, 6}));
}

TEST_F(VulkanTest, EveryDTypeRoundTrips) {
  const T flags = T::from_vector(std::vector<int32_t>{1, 0, 5}, {3}).ne(T::zeros({3}, DType::kI32));
  EXPECT_EQ(flags.dtype(), DType::kBool);
  EXPECT_EQ(V(flags), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(V(T::from_data(flags.to_data())), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(V(T::from_vector(std::vector<int64_t>{-(int64_t{1} << 40), 7}, {2})),
            (std::vector<double>{-static_cast<double>(int64_t{1} << 40), 7}));
  EXPECT_EQ(V(T::from_vector(std::vector<int32_t>{-5, 7}, {2})), (std::vector<double>{-5, 7}));
  EXPECT_EQ(V(T::from_vector(std::vector<double>{0.1, -2.5}, {2})), (std::vector<double>{0.1, -2.5}));
  EXPECT_EQ(V(T::from_vector(std::vector<float>{0.5f, -2.5f}, {2})), (std::vector<double>{0.5, -2.5}));
}

// Freed memory is reused once the work that used it has run: a training-like loop of fresh
// tensors does not grow the device's memory.
TEST_F(VulkanTest, MemoryIsReusedNotGrown) {
  Generator gen(3);
  const T w = T::uniform({256, 256}, -1, 1, gen, DType::kF32);
  T x = T::uniform({64, 256}, -1, 1, gen, DType::kF32);
  for (int i = 0; i < 20; ++i) x = (x.matmul(w) * 0.01).tanh();
  (void)V(x.sum());
  const int64_t reserved = vulkan::Context::Of(VulkanDevice(0)).reserved_bytes();
  for (int i = 0; i < 500; ++i) x = (x.matmul(w) * 0.01).tanh();
  (void)V(x.sum());
  EXPECT_EQ(vulkan::Context::Of(VulkanDevice(0)).reserved_bytes(), reserved);
}

// More elements than one grid dimension of 256-wide workgroups covers (65535 * 256).
TEST_F(VulkanTest, LaunchesWiderThanOneGridDimension) {
  const int64_t n = 65535 * 256 + 1000;
  const T ones = T::ones({n}, DType::kF32);
  EXPECT_EQ(V((ones + ones).sum()), (std::vector<double>{2.0 * n}));
  EXPECT_EQ(V(ones.to(DType::kI32).sum()), (std::vector<double>{static_cast<double>(n)}));
}

// More rows than one grid dimension holds: the launch spills into y, and its spare workgroups
// must not write (they once wrote past the output).
TEST_F(VulkanTest, RowReductionsWiderThanOneGridDimension) {
  const int64_t rows = 70000;
  const T x = T::ones({rows, 64}, DType::kF32);
  const T canary = T::full({rows}, 3, DType::kF32);
  const std::vector<double> sums = V(x.sum({1}));
  EXPECT_EQ(sums, std::vector<double>(rows, 64.0));
  EXPECT_EQ(V(canary), std::vector<double>(rows, 3.0));
}

// Index values made on the device are checked by reading them back; host-made ones by the
// range recorded at upload. Both give the CPU backend's error.
TEST_F(VulkanTest, DeviceMadeIndicesAreCheckedToo) {
  const T x = T::from_vector(std::vector<float>{1, 2, 3}, {3});
  const T good = T::from_vector(std::vector<int64_t>{0, 1}, {2});
  EXPECT_EQ(V(x.index_select(0, good + 1)), (std::vector<double>{2, 3}));
  try {
    (void)x.index_select(0, good + 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kOutOfRange);
    EXPECT_EQ(e.status().message(), "index_select: index 3 at position 1 is out of range [0, 3) for source shape [3]");
  }
  const T divisor = T::from_vector(std::vector<int64_t>{2, 1}, {2}) - 1;  // device-made: 1, 0
  try {
    (void)(good / divisor);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(), "div: integer division by zero (i64[2] / i64[2])");
  }
}

TEST_F(VulkanTest, MembersOnTheirOwnThreads) {
  std::vector<std::thread> threads;
  std::vector<double> sums(2);
  for (int d = 0; d < 2; ++d) {
    threads.emplace_back([d, &sums] {
      T acc = T::zeros({1000}, DType::kF32, VulkanDevice(d));
      for (int i = 0; i < 100; ++i) acc = acc + T::ones({1000}, DType::kF32, VulkanDevice(d));
      sums[d] = acc.sum().item<double>();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(sums, (std::vector<double>{100000, 100000}));
}

TEST_F(VulkanTest, DispatchRunsOnVulkanDevices) {
  using D = Tensor<Dispatch>;
  const auto device = DispatchDevice::Parse("vulkan:1");
  ASSERT_TRUE(device.ok()) << device.status();
  const D a = D::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}, *device);
  EXPECT_EQ(a.device(), *device);
  EXPECT_EQ(a.matmul(a).to_data().ToDoubles(), (std::vector<double>{7, 10, 15, 22}));
  const D on_cpu = a.to(DispatchDevice(CpuDevice(0)));
  EXPECT_EQ(on_cpu.device().backend(), "cpu");
  EXPECT_EQ(on_cpu.sum().item<double>(), 10);
}

}  // namespace
}  // namespace kiln
