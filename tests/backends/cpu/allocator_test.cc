// The large-buffer cache: a training loop's repeated sizes are served without the system.
#include "backends/cpu/allocator.h"

#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"

namespace kiln {
namespace {

TEST(Allocator, LargeBuffersAreReusedAndCanBeReleased) {
  cpu::ReleaseCachedBuffers();
  const cpu::CacheStats before = cpu::GetCacheStats();
  for (int step = 0; step < 5; ++step) {
    const CpuTensor x = CpuTensor::full({1 << 20}, step);  // 4 MiB
    EXPECT_EQ((x + 1).sum().item<double>(), (step + 1.0) * (1 << 20));
  }
  const cpu::CacheStats after = cpu::GetCacheStats();
  EXPECT_EQ(after.misses - before.misses, 2);  // x and x + 1 on the first step only
  EXPECT_EQ(after.hits - before.hits, 8);
  EXPECT_EQ(after.cached_bytes, 2 * (4 << 20));
  cpu::ReleaseCachedBuffers();
  EXPECT_EQ(cpu::GetCacheStats().cached_bytes, 0);
}

TEST(Allocator, SmallBuffersBypassTheCache) {
  const cpu::CacheStats before = cpu::GetCacheStats();
  for (int i = 0; i < 10; ++i) (void)CpuTensor::zeros({100});  // 400 bytes
  EXPECT_EQ(cpu::GetCacheStats().misses, before.misses);
  EXPECT_EQ(cpu::GetCacheStats().hits, before.hits);
}

TEST(Allocator, BuffersAreAligned) {
  std::byte* p = cpu::AllocateBuffer(3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % cpu::kBufferAlignment, 0u);
  cpu::FreeBuffer(p, 3);
}

}  // namespace
}  // namespace kiln
