// GraphPool: the memory of one captured CUDA graph. A graph's kernels read and write fixed
// addresses on every replay, so every buffer made while the graph was captured must stay
// reserved for it, at the same address, for as long as the graph exists: the pool takes its
// blocks from the device's shared CachingAllocator and gives them back only when it is
// destroyed (the last buffer from it gone and the graph with it). Within the pool, a block
// freed during capture may serve a later allocation of the same capture: the graph replays
// both uses in the same stream order as they were recorded.
//
// Blocks of the shared cache that are freed while a capture runs (Keep) may still be read by
// the graph (an input the captured work dropped), so they too are held until the pool goes,
// instead of being handed to the next eager op.
//
// Like the allocator it knows nothing of CUDA (tested with fake memory).
#ifndef KILN_BACKENDS_CUDA_GRAPH_POOL_H_
#define KILN_BACKENDS_CUDA_GRAPH_POOL_H_

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/cuda/allocator.h"

namespace kiln::cuda {

class GraphPool {
 public:
  struct Stats {
    int64_t reserved_bytes = 0;  // taken from the shared cache, held until the pool goes
    int64_t in_use_bytes = 0;    // handed out by the pool and not yet freed
    int64_t kept_blocks = 0;     // shared blocks freed during capture (Keep)
    int64_t allocations = 0;     // Allocate calls (hits and misses)
  };

  // `shared` outlives the pool (a device's allocator is never destroyed).
  explicit GraphPool(CachingAllocator& shared);
  GraphPool(const GraphPool&) = delete;
  GraphPool& operator=(const GraphPool&) = delete;
  // Every block goes back to the shared cache: stream-ordered, like any free (allocator.h),
  // which is safe because a graph is launched on the same compute stream as eager work.
  ~GraphPool();

  // A block of at least `nbytes`, from the pool's own free blocks or else from the shared cache.
  absl::StatusOr<CachingAllocator::Block> Allocate(size_t nbytes);
  // Back to the pool (never to the shared cache while the pool lives).
  void Free(CachingAllocator::Block block);
  // A block of the shared cache freed during capture: held until the pool goes.
  void Keep(CachingAllocator::Block block, CachingAllocator::Ready ready = nullptr);
  Stats GetStats() const;

 private:
  CachingAllocator& shared_;
  // The pool's own cache, over blocks of the shared one (so reuse follows the same rules).
  CachingAllocator own_;
  mutable std::mutex mu_;
  std::unordered_map<void*, CachingAllocator::Block> from_shared_;  // by address
  struct Kept {
    CachingAllocator::Block block;
    CachingAllocator::Ready ready;
  };
  std::vector<Kept> kept_;
  Stats stats_;
};

}  // namespace kiln::cuda

#endif  // KILN_BACKENDS_CUDA_GRAPH_POOL_H_
