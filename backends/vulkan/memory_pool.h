// MemoryPool: the device memory of one Vulkan memory type, taken from the device in large
// blocks carved into size classes; a freed range is reused once the GPU work that may still
// touch it has completed. Chunk is a tensor's piece of it.
#ifndef KILN_BACKENDS_VULKAN_MEMORY_POOL_H_
#define KILN_BACKENDS_VULKAN_MEMORY_POOL_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backends/vulkan/vk.h"
#include "tensor/memory_usage.h"

namespace kiln::vulkan {

class Context;

// One device allocation, cut into chunks; a device address covers it whole.
struct Block {
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t address = 0;
  std::byte* mapped = nullptr;  // host view, when the memory is host-visible
  int64_t size = 0, used = 0;
};

// A tensor's memory: `bytes` at `offset` of a block. Freed (for reuse) when the last tensor
// viewing it goes and the work queued before that has run.
class Chunk {
 public:
  Chunk(Context* context, Block* block, int64_t offset, int64_t bytes)
      : context_(context), block_(block), offset_(offset), bytes_(bytes) {}
  ~Chunk();
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  Context& context() const { return *context_; }
  uint64_t address() const { return block_->address + offset_; }
  VkBuffer buffer() const { return block_->buffer; }
  int64_t offset() const { return offset_; }
  int64_t bytes() const { return bytes_; }
  std::byte* mapped() const { return block_->mapped ? block_->mapped + offset_ : nullptr; }

  // Counts this chunk as a tensor's `bytes` in `counter` until it is freed (staging chunks
  // are not counted).
  void CountIn(MemoryCounter* counter, int64_t bytes) {
    counter_ = counter;
    counted_bytes_ = bytes;
    counter_->Allocated(bytes);
  }

  // [min, max] of the values an integer tensor was created with on the host, if known: index
  // and divisor checks then need no round trip to the device.
  std::optional<std::pair<int64_t, int64_t>> known_range;

 private:
  Context* context_;
  Block* block_;
  int64_t offset_, bytes_;
  MemoryCounter* counter_ = nullptr;
  int64_t counted_bytes_ = 0;
};

// The cap KILN_VULKAN_MEMORY_LIMIT_MB=N puts on a context's device memory, in bytes (no cap
// when unset); InvalidArgument when it is not a positive number of MiB.
absl::StatusOr<int64_t> MemoryLimitFromEnv();

// Not thread-safe: the owning Context's mutex guards it. Completion is counted in the
// context's submission numbers, so the pool never waits on the queue itself; the context
// decides when waiting is worth it (see Context::AllocateFrom).
class MemoryPool {
 public:
  static constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

  // An empty pool; Context::Create sets the real ones up.
  MemoryPool() = default;
  // Blocks of `memory_type` on `device`, mapped for the host when `host_visible`, at most
  // `limit` bytes in all. Chunks made here release through `owner`.
  MemoryPool(Context* owner, VkDevice device, uint32_t memory_type, bool host_visible, int64_t limit = kNoLimit)
      : owner_(owner), device_(device), memory_type_(memory_type), host_visible_(host_visible), limit_(limit) {}
  MemoryPool(MemoryPool&&) = default;
  MemoryPool& operator=(MemoryPool&&) = default;

  // At least `bytes` (> 0), from a freed range whose work completed by submission `completed`
  // or from fresh memory; null when the device is out of memory or the pool at its limit.
  std::shared_ptr<Chunk> TryAllocate(int64_t bytes, uint64_t completed);
  // A chunk's range, reusable once submission `after` has completed.
  void Release(Block* block, int64_t offset, int64_t size_class, uint64_t after);
  // Makes the ranges released before submission `completed` finished reusable.
  void Reclaim(uint64_t completed);
  // Gives the device back the cached blocks that held one large chunk each and are free now,
  // so that memory cached for one size can serve another (out of memory only).
  void ReleaseCached();

  // Device memory held in blocks (in use or cached for reuse).
  int64_t held() const;
  // ResourceExhausted for `bytes` that could not be had on device `device_name`.
  absl::Status OutOfMemory(absl::string_view device_name, int64_t bytes) const;

 private:
  struct Span {
    Block* block;
    int64_t offset;
  };
  struct Pending {
    Span span;
    int64_t size_class;
    uint64_t after;  // reusable once submission `after` has completed
  };

  // Null when the device is out of memory or the pool would pass limit_.
  Block* NewBlock(int64_t size);
  std::shared_ptr<Chunk> Carve(Block* block, int64_t size);

  Context* owner_ = nullptr;
  VkDevice device_ = VK_NULL_HANDLE;
  uint32_t memory_type_ = 0;
  bool host_visible_ = false;
  int64_t limit_ = kNoLimit;
  std::vector<std::unique_ptr<Block>> blocks_;
  Block* current_ = nullptr;                   // the shared block new chunks are carved from
  std::map<int64_t, std::vector<Span>> free_;  // by size class
  std::vector<Pending> pending_;
};

}  // namespace kiln::vulkan

#endif  // KILN_BACKENDS_VULKAN_MEMORY_POOL_H_
