#include "backends/cuda/graph_pool.h"

#include <utility>

namespace kiln::cuda {

GraphPool::GraphPool(CachingAllocator& shared)
    : shared_(shared),
      own_(
          "graph pool",
          [this](size_t n) -> absl::StatusOr<void*> {
            absl::StatusOr<CachingAllocator::Block> block = shared_.Allocate(n);
            if (!block.ok()) return block.status();
            std::lock_guard lock(mu_);
            from_shared_[block->ptr] = *block;
            stats_.reserved_bytes += static_cast<int64_t>(block->size);
            return block->ptr;
          },
          // Only from own_'s destructor or its release after a failed allocation: either way
          // the graph's capture is over or failing, and the block no longer serves it.
          [this](void* p) {
            std::lock_guard lock(mu_);
            const auto it = from_shared_.find(p);
            if (it == from_shared_.end()) return;
            stats_.reserved_bytes -= static_cast<int64_t>(it->second.size);
            shared_.Free(it->second);
            from_shared_.erase(it);
          }) {}

GraphPool::~GraphPool() {
  own_.ReleaseCached();  // every block is free by now: buffers hold the pool while they live
  std::lock_guard lock(mu_);
  for (Kept& k : kept_) shared_.Free(k.block, std::move(k.ready));
}

absl::StatusOr<CachingAllocator::Block> GraphPool::Allocate(size_t nbytes) {
  absl::StatusOr<CachingAllocator::Block> block = own_.Allocate(nbytes);
  std::lock_guard lock(mu_);
  ++stats_.allocations;
  if (block.ok()) stats_.in_use_bytes += static_cast<int64_t>(block->size);
  return block;
}

void GraphPool::Free(CachingAllocator::Block block) {
  if (block.ptr == nullptr) return;
  {
    std::lock_guard lock(mu_);
    stats_.in_use_bytes -= static_cast<int64_t>(block.size);
  }
  own_.Free(block);
}

void GraphPool::Keep(CachingAllocator::Block block, CachingAllocator::Ready ready) {
  if (block.ptr == nullptr) return;
  std::lock_guard lock(mu_);
  kept_.push_back({block, std::move(ready)});
  ++stats_.kept_blocks;
}

GraphPool::Stats GraphPool::GetStats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace kiln::cuda
