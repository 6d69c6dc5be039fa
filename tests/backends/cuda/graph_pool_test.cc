// GraphPool over a caching allocator of fake memory: a graph's blocks stay out of the shared
// cache until the pool goes, blocks freed during capture are reused within the pool, and
// shared blocks freed during capture are held as long as the pool.
#include "backends/cuda/graph_pool.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

namespace kiln::cuda {
namespace {

CachingAllocator MakeShared(int* allocations) {
  return CachingAllocator(
      "fake device memory",
      [allocations](size_t n) -> absl::StatusOr<void*> {
        ++*allocations;
        return std::malloc(n);
      },
      [](void* p) { std::free(p); });
}

TEST(GraphPool, BlocksStayReservedUntilThePoolGoes) {
  int allocations = 0;
  CachingAllocator shared = MakeShared(&allocations);
  void* graph_block = nullptr;
  {
    GraphPool pool(shared);
    auto a = pool.Allocate(4096);
    ASSERT_TRUE(a.ok());
    graph_block = a->ptr;
    pool.Free(*a);
    // Freed, but the shared cache must not hand it to eager work: the graph writes it.
    auto eager = shared.Allocate(4096);
    ASSERT_TRUE(eager.ok());
    EXPECT_NE(eager->ptr, graph_block);
    shared.Free(*eager);
    // Within the pool, a later allocation of the capture reuses it.
    auto b = pool.Allocate(4096);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->ptr, graph_block);
    pool.Free(*b);
    EXPECT_EQ(pool.GetStats().in_use_bytes, 0);
    EXPECT_EQ(pool.GetStats().reserved_bytes, 4096);
  }
  // The pool is gone: its block is the shared cache's again (no new allocation for it).
  const int before = allocations;
  auto again = shared.Allocate(4096);
  auto other = shared.Allocate(4096);
  ASSERT_TRUE(again.ok() && other.ok());
  EXPECT_TRUE(again->ptr == graph_block || other->ptr == graph_block);
  EXPECT_EQ(allocations, before);
  shared.Free(*again);
  shared.Free(*other);
}

TEST(GraphPool, SharedBlocksFreedDuringCaptureAreKept) {
  int allocations = 0;
  CachingAllocator shared = MakeShared(&allocations);
  auto input = shared.Allocate(1024);
  ASSERT_TRUE(input.ok());
  {
    GraphPool pool(shared);
    pool.Keep(*input);  // the captured work read it, then dropped it
    EXPECT_EQ(pool.GetStats().kept_blocks, 1);
    auto eager = shared.Allocate(1024);
    ASSERT_TRUE(eager.ok());
    EXPECT_NE(eager->ptr, input->ptr);  // not handed out while the graph may read it
    shared.Free(*eager);
  }
  EXPECT_EQ(shared.GetStats().in_use_bytes, 0);
  EXPECT_EQ(shared.GetStats().cached_bytes, 2048);
}

}  // namespace
}  // namespace kiln::cuda
