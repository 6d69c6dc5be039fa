// CachingAllocator: memory blocks reused by size class instead of returned to the system, so
// tensors never pay for cudaMalloc/cudaFree (each synchronises the device) after warm-up.
// It knows nothing of CUDA: the raw allocate/free functions are given, which is how the CUDA
// backend uses one for device memory and one for pinned host memory, and how it is tested on
// machines without a GPU.
//
// Frees are stream-ordered: a device block freed while kernels that use it are still queued
// may be handed out at once, because every later user is queued on the same compute stream
// and so runs after them. A block still in use elsewhere (a pinned staging buffer of a copy in
// flight) is freed with a `ready` test and is reused only once that test passes.
#ifndef KILN_BACKENDS_CUDA_ALLOCATOR_H_
#define KILN_BACKENDS_CUDA_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::cuda {

class CachingAllocator {
 public:
  struct Block {
    void* ptr = nullptr;
    size_t size = 0;  // the size class actually allocated (>= what was asked)
  };
  using RawAllocate = std::function<absl::StatusOr<void*>(size_t)>;
  using RawFree = std::function<void(void*)>;
  using Ready = std::function<bool()>;

  struct Stats {
    int64_t in_use_bytes = 0;  // handed out and not yet freed
    int64_t cached_bytes = 0;  // free blocks held for reuse (including pending ones)
    int64_t hits = 0;          // allocations served from the cache
    int64_t misses = 0;        // allocations that went to RawAllocate
    int64_t releases = 0;      // times the cache was emptied to satisfy an allocation
  };

  // Blocks below kLargeBlock are rounded up to multiples of kSmallRound, others to multiples
  // of kLargeRound; a cached block is reused for a request of at least half its size.
  static constexpr size_t kSmallRound = 512;
  static constexpr size_t kLargeBlock = size_t{1} << 20;
  static constexpr size_t kLargeRound = size_t{2} << 20;
  static size_t SizeClass(size_t nbytes);

  CachingAllocator(std::string name, RawAllocate allocate, RawFree free);
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator();

  // A block of at least `nbytes` (nbytes 0 gives a null block). When the system has no memory
  // left, the cache is returned to it and the allocation retried once; then the error of
  // RawAllocate comes back (ResourceExhausted, with the sizes involved).
  absl::StatusOr<Block> Allocate(size_t nbytes);
  // Returns `block` to the cache; with `ready`, only once ready() is true.
  void Free(Block block, Ready ready = nullptr);
  // Returns every free block whose pending use is over to the system.
  void ReleaseCached();
  Stats GetStats() const;

 private:
  void SweepPendingLocked();
  void ReleaseLocked();
  void CacheLocked(Block block);

  const std::string name_;
  const RawAllocate allocate_;
  const RawFree free_;
  mutable std::mutex mu_;
  using FreeBlocks = std::multimap<size_t, void*>;
  FreeBlocks free_blocks_;  // size class -> block
  // Map nodes of blocks handed out, reused when blocks come back: a steady stream of ops then
  // allocates and frees no host memory for the cache's bookkeeping.
  std::vector<FreeBlocks::node_type> spare_nodes_;
  struct Pending {
    Block block;
    Ready ready;
  };
  std::vector<Pending> pending_;
  Stats stats_;
};

}  // namespace kiln::cuda

#endif  // KILN_BACKENDS_CUDA_ALLOCATOR_H_
