// With no Vulkan driver (the loader is pointed at none), every way in gives one clear status,
// never a crash: the other backends keep working.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "backends/dispatch/dispatch_backend.h"
#include "backends/vulkan/vulkan_backend.h"

namespace kiln {
namespace {

TEST(VulkanUnavailable, EveryEntryGivesTheSameClearStatus) {
  const absl::Status s = vulkan::Available();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(s.message(), "apt-get install mesa-vulkan-drivers")) << s;
  EXPECT_EQ(vulkan::DeviceCount().status(), s);
  EXPECT_EQ(vulkan::CheckDevice(VulkanDevice(0)), s);
  // Parsing is syntax only; asking whether the device exists gives the same status.
  EXPECT_EQ(DispatchDevice::Parse("vulkan:0")->Check(), s);
  try {
    (void)Tensor<Vulkan>::zeros({2});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), s);
  }
  EXPECT_EQ(Tensor<Cpu>::ones({2}).sum().item<double>(), 2);
}

}  // namespace
}  // namespace kiln
