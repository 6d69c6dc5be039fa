// Device memory under a cap (KILN_VULKAN_MEMORY_LIMIT_MB=160, set by the BUILD rule): what a
// full device looks like, made small enough to reach on any machine. Allocation waits for
// queued work to free its chunks, then gives back cached blocks of other sizes, and only
// then fails, with a status that says how much is held and that the cap is why.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "backends/vulkan/context.h"
#include "backends/vulkan/vulkan_backend.h"
#include "tests/backends.h"

namespace kiln {
namespace {

using T = Tensor<Vulkan>;
constexpr int64_t kLimit = int64_t{160} << 20;

class VulkanMemoryLimit : public ::testing::Test {
 protected:
  void SetUp() override { KILN_SKIP_IF_UNAVAILABLE(Vulkan); }
  static int64_t Held() { return vulkan::Context::Of(VulkanDevice(0)).reserved_bytes(); }
  // Eight steps of x = x + 1 on `n` floats: each step's output needs a fresh large chunk
  // while the last ones may still be queued.
  static double Steps(int64_t n) {
    T x = T::full({n}, 1.0, DType::kF32);
    for (int i = 0; i < 8; ++i) x = x + 1;
    return x.slice(0, n - 1, n).to_data().ToDoubles()[0];
  }
};

TEST_F(VulkanMemoryLimit, LargeTemporariesWaitForQueuedWorkInsteadOfFailing) {
  EXPECT_EQ(Steps(int64_t{9} << 20), 9);  // 36 MiB each: at most four fit under the cap
  EXPECT_LE(Held(), kLimit);
}

TEST_F(VulkanMemoryLimit, CachedBlocksOfOneSizeServeAnother) {
  EXPECT_EQ(Steps(int64_t{9} << 20), 9);   // the cache fills with 36 MiB blocks
  EXPECT_EQ(Steps(int64_t{11} << 20), 9);  // 44 MiB ones need that memory back
  EXPECT_EQ(Steps(int64_t{9} << 20), 9);
  EXPECT_LE(Held(), kLimit);
}

TEST_F(VulkanMemoryLimit, PastTheCapIsAClearErrorAndTheDeviceStillWorks) {
  const T kept = T::full({4}, 2.0, DType::kF32);
  try {
    (void)T::full({int64_t{50} << 20}, 1.0, DType::kF32);  // 200 MiB
    FAIL() << "a 200 MiB tensor under a 160 MiB cap";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(absl::StartsWith(e.status().message(), "vulkan: out of memory on ")) << e.status();
    EXPECT_TRUE(absl::StrContains(e.status().message(), " allocating 209715200 bytes (")) << e.status();
    EXPECT_TRUE(absl::EndsWith(e.status().message(),
                               " bytes held by kiln's tensors and cache; KILN_VULKAN_MEMORY_LIMIT_MB=160 caps it)"))
        << e.status();
  }
  EXPECT_EQ((kept * 3).to_data().ToDoubles(), (std::vector<double>{6, 6, 6, 6}));
  EXPECT_LE(Held(), kLimit);
}

}  // namespace
}  // namespace kiln
