#include "backends/cuda/allocator.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace kiln::cuda {

size_t CachingAllocator::SizeClass(size_t nbytes) {
  if (nbytes == 0) return 0;
  const size_t round = nbytes < kLargeBlock ? kSmallRound : kLargeRound;
  return (nbytes + round - 1) / round * round;
}

CachingAllocator::CachingAllocator(std::string name, RawAllocate allocate, RawFree free)
    : name_(std::move(name)), allocate_(std::move(allocate)), free_(std::move(free)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mu_);
  for (const auto& [size, ptr] : free_blocks_) free_(ptr);
  // Pending blocks may still be read by a copy in flight: leaking them beats a use-after-free.
}

void CachingAllocator::SweepPendingLocked() {
  for (size_t i = 0; i < pending_.size();) {
    if (pending_[i].ready()) {
      CacheLocked(pending_[i].block);
      pending_[i] = std::move(pending_.back());
      pending_.pop_back();
    } else {
      ++i;
    }
  }
}

void CachingAllocator::ReleaseLocked() {
  SweepPendingLocked();
  for (const auto& [size, ptr] : free_blocks_) {
    free_(ptr);
    stats_.cached_bytes -= static_cast<int64_t>(size);
  }
  free_blocks_.clear();
  spare_nodes_.clear();
}

void CachingAllocator::CacheLocked(Block block) {
  if (spare_nodes_.empty()) {
    free_blocks_.emplace(block.size, block.ptr);
    return;
  }
  FreeBlocks::node_type node = std::move(spare_nodes_.back());
  spare_nodes_.pop_back();
  node.key() = block.size;
  node.mapped() = block.ptr;
  free_blocks_.insert(std::move(node));
}

absl::StatusOr<CachingAllocator::Block> CachingAllocator::Allocate(size_t nbytes) {
  const size_t size = SizeClass(nbytes);
  if (size == 0) return Block{};
  std::lock_guard lock(mu_);
  if (!pending_.empty()) SweepPendingLocked();
  // Best fit among cached blocks, but never one more than twice the size asked for.
  if (auto it = free_blocks_.lower_bound(size); it != free_blocks_.end() && it->first <= 2 * size) {
    const Block block{it->second, it->first};
    spare_nodes_.push_back(free_blocks_.extract(it));
    stats_.cached_bytes -= static_cast<int64_t>(block.size);
    stats_.in_use_bytes += static_cast<int64_t>(block.size);
    ++stats_.hits;
    return block;
  }
  absl::StatusOr<void*> ptr = allocate_(size);
  if (!ptr.ok() && (!free_blocks_.empty() || !pending_.empty())) {
    ReleaseLocked();
    ++stats_.releases;
    ptr = allocate_(size);
  }
  if (!ptr.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(name_, ": cannot allocate ", size, " bytes (", stats_.in_use_bytes,
                                                     " bytes in use, ", stats_.cached_bytes,
                                                     " cached): ", ptr.status().message()));
  }
  ++stats_.misses;
  stats_.in_use_bytes += static_cast<int64_t>(size);
  return Block{*ptr, size};
}

void CachingAllocator::Free(Block block, Ready ready) {
  if (block.ptr == nullptr) return;
  std::lock_guard lock(mu_);
  stats_.in_use_bytes -= static_cast<int64_t>(block.size);
  stats_.cached_bytes += static_cast<int64_t>(block.size);
  if (ready && !ready()) {
    pending_.push_back({block, std::move(ready)});
  } else {
    CacheLocked(block);
  }
}

void CachingAllocator::ReleaseCached() {
  std::lock_guard lock(mu_);
  ReleaseLocked();
}

CachingAllocator::Stats CachingAllocator::GetStats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace kiln::cuda
