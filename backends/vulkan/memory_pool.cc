#include "backends/vulkan/memory_pool.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backends/vulkan/context.h"
#include "tensor/error.h"

namespace kiln::vulkan {
namespace {

constexpr int64_t kBlockBytes = int64_t{64} << 20;

// Size classes: four per power of two from 256 bytes (at most 25% slack), so freed chunks
// fit later requests of nearby sizes.
int64_t SizeClass(int64_t bytes) {
  int64_t c = 256;
  while (c < bytes) c <<= 1;
  if (c <= 1024) return c;
  const int64_t quarter = c / 8;  // c/2 < bytes <= c: try c/2 + k * c/8
  for (int64_t k = 1; k < 4; ++k) {
    if (c / 2 + k * quarter >= bytes) return c / 2 + k * quarter;
  }
  return c;
}

}  // namespace

// The context decides when a range is safe to reuse (it knows what is queued), so a chunk
// releases through it rather than straight into its pool.
Chunk::~Chunk() {
  if (counter_ != nullptr) counter_->Freed(counted_bytes_);
  context_->Release(block_, offset_, bytes_);
}

absl::StatusOr<int64_t> MemoryLimitFromEnv() {
  const char* limit = std::getenv("KILN_VULKAN_MEMORY_LIMIT_MB");
  if (limit == nullptr || *limit == '\0') return MemoryPool::kNoLimit;
  int64_t mib = 0;
  if (!absl::SimpleAtoi(limit, &mib) || mib < 1 || mib > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KILN_VULKAN_MEMORY_LIMIT_MB='", limit, "' is not a positive number of MiB; set it to e.g. 4096 or unset it"));
  }
  return mib << 20;
}

int64_t MemoryPool::held() const {
  int64_t held = 0;
  for (const auto& b : blocks_) held += b->size;
  return held;
}

Block* MemoryPool::NewBlock(int64_t size) {
  if (held() + size > limit_) return nullptr;
  const Functions& vk = Vk();
  auto block = std::make_unique<Block>();
  block->size = size;
  VkBufferCreateInfo info{.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                          .size = static_cast<VkDeviceSize>(size),
                          .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
                          .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  ThrowIfFailed(vk.vkCreateBuffer(device_, &info, nullptr, &block->buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(device_, block->buffer, &req);
  VkMemoryAllocateFlagsInfo flags{.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                  .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
  VkMemoryAllocateInfo alloc{.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                             .pNext = &flags,
                             .allocationSize = req.size,
                             .memoryTypeIndex = memory_type_};
  const VkResult r = vk.vkAllocateMemory(device_, &alloc, nullptr, &block->memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
    vk.vkDestroyBuffer(device_, block->buffer, nullptr);
    return nullptr;
  }
  ThrowIfFailed(r, "vkAllocateMemory");
  ThrowIfFailed(vk.vkBindBufferMemory(device_, block->buffer, block->memory, 0), "vkBindBufferMemory");
  VkBufferDeviceAddressInfo address{.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = block->buffer};
  block->address = vk.vkGetBufferDeviceAddress(device_, &address);
  if (host_visible_) {
    void* p = nullptr;
    ThrowIfFailed(vk.vkMapMemory(device_, block->memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    block->mapped = static_cast<std::byte*>(p);
  }
  blocks_.push_back(std::move(block));
  return blocks_.back().get();
}

void MemoryPool::ReleaseCached() {
  const Functions& vk = Vk();
  for (auto& [size, spans] : free_) {
    std::erase_if(spans, [&](const Span& span) {
      Block* block = span.block;
      if (span.offset != 0 || block->size != size || block == current_) return false;
      vk.vkDestroyBuffer(device_, block->buffer, nullptr);
      vk.vkFreeMemory(device_, block->memory, nullptr);
      std::erase_if(blocks_, [&](const std::unique_ptr<Block>& b) { return b.get() == block; });
      return true;
    });
  }
}

void MemoryPool::Reclaim(uint64_t completed) {
  size_t kept = 0;
  for (Pending& p : pending_) {
    if (p.after <= completed) {
      free_[p.size_class].push_back(p.span);
    } else {
      pending_[kept++] = p;
    }
  }
  pending_.resize(kept);
}

void MemoryPool::Release(Block* block, int64_t offset, int64_t size_class, uint64_t after) {
  pending_.push_back({{block, offset}, size_class, after});
}

std::shared_ptr<Chunk> MemoryPool::Carve(Block* block, int64_t size) {
  const int64_t offset = block->used;
  block->used += size;
  return std::make_shared<Chunk>(owner_, block, offset, size);
}

std::shared_ptr<Chunk> MemoryPool::TryAllocate(int64_t bytes, uint64_t completed) {
  Reclaim(completed);
  const int64_t size = SizeClass(bytes);
  if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
    const Span span = it->second.back();
    it->second.pop_back();
    return std::make_shared<Chunk>(owner_, span.block, span.offset, size);
  }
  if (size > kBlockBytes / 2) {  // a block of its own
    if (Block* block = NewBlock(size)) return Carve(block, size);
  } else {
    if (current_ == nullptr || current_->size - current_->used < size) current_ = NewBlock(kBlockBytes);
    if (current_ != nullptr) return Carve(current_, size);
  }
  return nullptr;
}

absl::Status MemoryPool::OutOfMemory(absl::string_view device_name, int64_t bytes) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "vulkan: out of memory on ", device_name, " allocating ", bytes, " bytes (", held(),
      " bytes held by kiln's tensors and cache",
      limit_ != kNoLimit ? absl::StrCat("; KILN_VULKAN_MEMORY_LIMIT_MB=", limit_ >> 20, " caps it") : "", ")"));
}

}  // namespace kiln::vulkan
