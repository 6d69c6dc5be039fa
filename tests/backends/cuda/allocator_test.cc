// The caching allocator's policy with fake memory (no GPU needed): size classes, reuse without
// new system allocations, pending frees held back until ready, and the retry that returns the
// cache to the system when memory runs out.
#include "backends/cuda/allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

namespace kiln::cuda {
namespace {

// System memory that counts calls and can be limited.
struct FakeMemory {
  int allocations = 0;
  int frees = 0;
  size_t live = 0;
  size_t limit = SIZE_MAX;
  std::set<void*> blocks;

  CachingAllocator Make() {
    return CachingAllocator(
        "fake memory",
        [this](size_t n) -> absl::StatusOr<void*> {
          if (live + n > limit) return absl::ResourceExhaustedError("fake out of memory");
          ++allocations;
          live += n;
          void* p = std::malloc(n);
          blocks.insert(p);
          sizes[p] = n;
          return p;
        },
        [this](void* p) {
          ++frees;
          live -= sizes[p];
          blocks.erase(p);
          std::free(p);
        });
  }
  std::map<void*, size_t> sizes;
};

TEST(CachingAllocator, SizeClasses) {
  EXPECT_EQ(CachingAllocator::SizeClass(0), 0u);
  EXPECT_EQ(CachingAllocator::SizeClass(1), 512u);
  EXPECT_EQ(CachingAllocator::SizeClass(512), 512u);
  EXPECT_EQ(CachingAllocator::SizeClass(513), 1024u);
  EXPECT_EQ(CachingAllocator::SizeClass((1 << 20) - 1), size_t{1} << 20);
  EXPECT_EQ(CachingAllocator::SizeClass((1 << 20) + 1), size_t{2} << 20);
  EXPECT_EQ(CachingAllocator::SizeClass((5 << 20) + 3), size_t{6} << 20);
}

TEST(CachingAllocator, ReusesFreedBlocksWithoutNewAllocations) {
  FakeMemory memory;
  CachingAllocator a = memory.Make();
  for (int step = 0; step < 10; ++step) {  // a training loop asking for the same sizes
    auto x = a.Allocate(1000);
    auto y = a.Allocate(3 << 20);
    ASSERT_TRUE(x.ok() && y.ok());
    EXPECT_EQ(x->size, 1024u);
    a.Free(*x);
    a.Free(*y);
  }
  EXPECT_EQ(memory.allocations, 2);
  const auto stats = a.GetStats();
  EXPECT_EQ(stats.hits, 18);
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.in_use_bytes, 0);
  EXPECT_EQ(stats.cached_bytes, 1024 + (4 << 20));
  a.ReleaseCached();
  EXPECT_EQ(memory.frees, 2);
  EXPECT_EQ(a.GetStats().cached_bytes, 0);
}

TEST(CachingAllocator, NeverHandsOutABlockMoreThanTwiceTheRequest) {
  FakeMemory memory;
  CachingAllocator a = memory.Make();
  auto big = a.Allocate(8 << 20);
  ASSERT_TRUE(big.ok());
  a.Free(*big);
  auto small = a.Allocate(1 << 20);  // 2 MiB class: the cached 8 MiB block is too big
  ASSERT_TRUE(small.ok());
  EXPECT_NE(small->ptr, big->ptr);
  auto half = a.Allocate(4 << 20);  // exactly half: reused
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->ptr, big->ptr);
  a.Free(*small);
  a.Free(*half);
}

TEST(CachingAllocator, PendingFreesWaitUntilReady) {
  FakeMemory memory;
  CachingAllocator a = memory.Make();
  auto x = a.Allocate(100);
  ASSERT_TRUE(x.ok());
  bool copy_done = false;  // e.g. an event after the copy that reads the block
  a.Free(*x, [&] { return copy_done; });
  auto y = a.Allocate(100);
  ASSERT_TRUE(y.ok());
  EXPECT_NE(y->ptr, x->ptr) << "a block still in use was handed out";
  copy_done = true;
  auto z = a.Allocate(100);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->ptr, x->ptr);
  a.Free(*y);
  a.Free(*z);
}

TEST(CachingAllocator, OutOfMemoryReturnsTheCacheAndRetries) {
  FakeMemory memory;
  memory.limit = 10 << 20;
  CachingAllocator a = memory.Make();
  auto x = a.Allocate(6 << 20);
  ASSERT_TRUE(x.ok());
  a.Free(*x);                    // cached: 6 MiB held
  auto y = a.Allocate(8 << 20);  // too big to reuse, and 6 + 8 > 10: release, then retry
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(a.GetStats().releases, 1);
  EXPECT_EQ(memory.frees, 1);
  auto z = a.Allocate(8 << 20);  // 8 + 8 > 10 with nothing cached: a clear error
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(z.status().message(),
            "fake memory: cannot allocate 8388608 bytes (8388608 bytes in use, 0 cached): fake out "
            "of memory");
  a.Free(*y);
}

TEST(CachingAllocator, ZeroBytesIsANullBlock) {
  FakeMemory memory;
  CachingAllocator a = memory.Make();
  auto x = a.Allocate(0);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->ptr, nullptr);
  a.Free(*x);
  EXPECT_EQ(memory.allocations, 0);
}

}  // namespace
}  // namespace kiln::cuda
