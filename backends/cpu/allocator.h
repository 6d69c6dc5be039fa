// Host memory for CPU tensors. Buffers of 1 KiB and more are cached and reused: a fresh
// multi-megabyte allocation is an mmap whose pages the kernel must fault in and zero on first
// touch, which costs as much as the element-wise op that writes them, and mid-sized ones churn
// malloc's bins. A training loop asks for the same sizes every step, so after the first step
// its buffers come from the cache.
#ifndef KILN_BACKENDS_CPU_ALLOCATOR_H_
#define KILN_BACKENDS_CPU_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

inline constexpr size_t kBufferAlignment = 64;

// 64-byte aligned; never null (throws std::bad_alloc).
std::byte* AllocateBuffer(int64_t nbytes);
void FreeBuffer(std::byte* data, int64_t nbytes);

struct CacheStats {
  int64_t cached_bytes;  // held for reuse now
  int64_t hits;          // allocations served from the cache
  int64_t misses;        // large allocations that went to the system
};
CacheStats GetCacheStats();
// Returns every cached buffer to the system.
void ReleaseCachedBuffers();

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_ALLOCATOR_H_
