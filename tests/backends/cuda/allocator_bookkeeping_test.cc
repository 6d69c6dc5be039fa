// The caching allocator's own bookkeeping allocates no host memory once warm: every CUDA op
// allocates and frees a block, so a heap allocation there would be paid on each op. Its own
// binary, because it counts every operator new of the process.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "backends/cuda/allocator.h"

namespace {
std::atomic<int64_t> heap_allocations{0};
}  // namespace

void* operator new(size_t n) {
  heap_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// GCC cannot see that the operator new above is malloc, so it calls free on its pointers
// mismatched (-Wmismatched-new-delete, a false alarm for a replaced pair).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace kiln::cuda {
namespace {

TEST(CachingAllocatorBookkeeping, WarmAllocateAndFreeDoNoHeapAllocation) {
  std::vector<void*> raw;
  CachingAllocator memory(
      "host memory",
      [&raw](size_t n) -> absl::StatusOr<void*> {
        raw.push_back(std::malloc(n));
        return raw.back();
      },
      [](void* p) { std::free(p); });
  // Warm-up: the sizes of one "step" (two tensors alive at once, of two size classes).
  for (int i = 0; i < 2; ++i) {
    const CachingAllocator::Block a = *memory.Allocate(1000), b = *memory.Allocate(5000);
    memory.Free(a);
    memory.Free(b);
  }
  const int64_t before = heap_allocations.load();
  for (int step = 0; step < 100; ++step) {
    const CachingAllocator::Block a = *memory.Allocate(1000), b = *memory.Allocate(5000);
    memory.Free(b);
    memory.Free(a);
  }
  EXPECT_EQ(heap_allocations.load() - before, 0);
  EXPECT_EQ(memory.GetStats().misses, 2);  // the blocks themselves were reused too
}

}  // namespace
}  // namespace kiln::cuda
