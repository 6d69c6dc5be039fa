#include "backends/vulkan/context.h"

#include <cstring>
#include <optional>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "backends/vulkan/shaders.h"
#include "tensor/error.h"

namespace kiln::vulkan {
namespace {

// Dispatches per command buffer: enough to amortise a submit, few enough that freed memory
// comes back soon and the device starts early.
constexpr int kBatch = 64;
// Submissions the host may run ahead of the device before it waits.
constexpr size_t kMaxInFlight = 8;
constexpr uint32_t kParamsBytes = 128;  // Vulkan's guaranteed push-constant space

std::optional<uint32_t> FindMemoryType(const VkPhysicalDeviceMemoryProperties& props, uint32_t allowed,
                                       VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < props.memoryTypeCount; ++i) {
    if ((allowed & (1u << i)) && (props.memoryTypes[i].propertyFlags & want) == want) return i;
  }
  return std::nullopt;
}

const std::unordered_map<std::string, int>& KernelIds() {
  static const auto* ids = [] {
    auto* m = new std::unordered_map<std::string, int>;
    for (int i = 0; i < static_cast<int>(std::size(spirv::kAll)); ++i) (*m)[spirv::kAll[i].name] = i;
    return m;
  }();
  return *ids;
}

// Unavailable below Vulkan 1.2 or with fewer than kParamsBytes of push constants.
absl::Status CheckProperties(const VkPhysicalDeviceProperties& props, const std::string& name) {
  if (props.apiVersion < VK_API_VERSION_1_2) {
    return absl::UnavailableError(absl::StrCat(name, " supports Vulkan ", VK_API_VERSION_MAJOR(props.apiVersion), ".",
                                               VK_API_VERSION_MINOR(props.apiVersion), "; kiln needs 1.2"));
  }
  if (props.limits.maxPushConstantsSize < kParamsBytes) {
    return absl::UnavailableError(absl::StrCat(name, " has ", props.limits.maxPushConstantsSize,
                                               " bytes of push constants; kiln needs ", kParamsBytes));
  }
  return absl::OkStatus();
}

// The optional features kiln turns on where the device has them.
struct Features {
  VkBool32 f64, int64_atomics, storage_16bit;
};

// Unavailable without the features kiln's kernels need (buffer device addresses, 64-bit integers).
absl::StatusOr<Features> QueryFeatures(const Functions& vk, VkPhysicalDevice physical, const std::string& name) {
  VkPhysicalDeviceVulkan11Features f11{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f11};
  VkPhysicalDeviceFeatures2 f2{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12};
  vk.vkGetPhysicalDeviceFeatures2(physical, &f2);
  if (!f12.bufferDeviceAddress || !f2.features.shaderInt64) {
    return absl::UnavailableError(absl::StrCat(name, " lacks ",
                                               !f12.bufferDeviceAddress ? "bufferDeviceAddress" : "shaderInt64",
                                               ", which kiln's kernels need"));
  }
  return Features{.f64 = f2.features.shaderFloat64,
                  .int64_atomics = f12.shaderBufferInt64Atomics,
                  .storage_16bit = f11.storageBuffer16BitAccess};
}

// The first queue family that computes; Unavailable when none does.
absl::StatusOr<uint32_t> ComputeFamily(const Functions& vk, VkPhysicalDevice physical, const std::string& name) {
  uint32_t families = 0;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, nullptr);
  std::vector<VkQueueFamilyProperties> family_props(families);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(physical, &families, family_props.data());
  for (uint32_t i = 0; i < families; ++i) {
    if (family_props[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return i;
  }
  return absl::UnavailableError(absl::StrCat(name, " has no compute queue"));
}

// A logical device with `features` on and one queue from `family`.
absl::Status CreateDevice(const Functions& vk, VkPhysicalDevice physical, const Features& features, uint32_t family,
                          VkDevice* device) {
  VkPhysicalDeviceVulkan11Features enable11{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .storageBuffer16BitAccess = features.storage_16bit};
  VkPhysicalDeviceVulkan12Features enable12{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = &enable11,
                                            .shaderBufferInt64Atomics = features.int64_atomics,
                                            .bufferDeviceAddress = VK_TRUE};
  VkPhysicalDeviceFeatures2 enable{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &enable12};
  enable.features.shaderInt64 = VK_TRUE;
  enable.features.shaderFloat64 = features.f64;
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                .queueFamilyIndex = family,
                                .queueCount = 1,
                                .pQueuePriorities = &priority};
  VkDeviceCreateInfo info{.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                          .pNext = &enable,
                          .queueCreateInfoCount = 1,
                          .pQueueCreateInfos = &queue};
  return Check(vk.vkCreateDevice(physical, &info, nullptr, device), "vkCreateDevice");
}

// The command pool of `family`'s queue and the pipeline layout every kernel shares (push
// constants only).
absl::Status CreatePoolAndLayout(const Functions& vk, VkDevice device, uint32_t family, VkCommandPool* command_pool,
                                 VkPipelineLayout* layout) {
  VkCommandPoolCreateInfo pool{.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                               .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                               .queueFamilyIndex = family};
  if (absl::Status s = Check(vk.vkCreateCommandPool(device, &pool, nullptr, command_pool), "vkCreateCommandPool");
      !s.ok()) {
    return s;
  }
  VkPushConstantRange range{.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = kParamsBytes};
  VkPipelineLayoutCreateInfo info{.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                  .pushConstantRangeCount = 1,
                                  .pPushConstantRanges = &range};
  return Check(vk.vkCreatePipelineLayout(device, &info, nullptr, layout), "vkCreatePipelineLayout");
}

// The memory types of the context's two pools, and whether device memory is mapped.
struct MemoryTypes {
  uint32_t device, staging;
  bool mapped;
};

// Device memory: device-local. On a device that shares memory with the host (an integrated
// GPU, lavapipe) it is host-visible too, and transfers are plain copies; a discrete GPU goes
// through host-visible staging memory and copies on the queue.
absl::StatusOr<MemoryTypes> ChooseMemoryTypes(const Functions& vk, VkPhysicalDevice physical, VkPhysicalDeviceType type,
                                              bool force_staging, const std::string& name) {
  VkPhysicalDeviceMemoryProperties memory;
  vk.vkGetPhysicalDeviceMemoryProperties(physical, &memory);
  const bool unified = type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU || type == VK_PHYSICAL_DEVICE_TYPE_CPU;
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const auto unified_type = FindMemoryType(memory, ~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | host);
  const auto local_type = FindMemoryType(memory, ~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  auto staging_type = FindMemoryType(memory, ~0u, host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  if (!staging_type) staging_type = FindMemoryType(memory, ~0u, host);
  if (!staging_type) return absl::UnavailableError(absl::StrCat(name, " has no host-visible memory"));
  const bool mapped = unified && unified_type && !force_staging;
  return MemoryTypes{.device = mapped ? *unified_type : local_type.value_or(*staging_type),
                     .staging = *staging_type,
                     .mapped = mapped};
}

}  // namespace

int KernelId(absl::string_view name) {
  const auto& ids = KernelIds();
  auto it = ids.find(std::string(name));
  if (it == ids.end()) ThrowIfError(absl::InternalError(absl::StrCat("no Vulkan kernel ", name)));
  return it->second;
}

absl::StatusOr<std::unique_ptr<Context>> Context::Create(VkPhysicalDevice physical, bool force_staging) {
  const Functions& vk = Vk();
  auto c = std::make_unique<Context>();
  c->physical_ = physical;
  VkPhysicalDeviceProperties props;
  vk.vkGetPhysicalDeviceProperties(physical, &props);
  c->name_ = props.deviceName;
  c->max_groups_x_ = props.limits.maxComputeWorkGroupCount[0];
  c->max_groups_y_ = props.limits.maxComputeWorkGroupCount[1];
  // A GPU needs thousands of invocations per core to hide latency; a CPU implementation
  // (lavapipe) pays per workgroup and wants a few per thread.
  c->fill_groups_ = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 16 : 2048;
  if (absl::Status s = CheckProperties(props, c->name_); !s.ok()) return s;

  const absl::StatusOr<Features> features = QueryFeatures(vk, physical, c->name_);
  if (!features.ok()) return features.status();
  c->has_f64_ = features->f64;
  c->has_int64_atomics_ = features->int64_atomics;
  // bf16 and f16 tensors are 2-byte elements that kernels load and store as uint16_t.
  c->has_16bit_storage_ = c->has_16bit_storage_real_ = features->storage_16bit;
  const absl::StatusOr<uint32_t> family = ComputeFamily(vk, physical, c->name_);
  if (!family.ok()) return family.status();
  if (absl::Status s = CreateDevice(vk, physical, *features, *family, &c->device_); !s.ok()) return s;
  vk.vkGetDeviceQueue(c->device_, *family, 0, &c->queue_);
  if (absl::Status s = CreatePoolAndLayout(vk, c->device_, *family, &c->command_pool_, &c->layout_); !s.ok()) return s;
  c->pipelines_.assign(std::size(spirv::kAll), VK_NULL_HANDLE);

  const absl::StatusOr<MemoryTypes> types = ChooseMemoryTypes(vk, physical, props.deviceType, force_staging, c->name_);
  if (!types.ok()) return types.status();
  c->mapped_ = types->mapped;
  const absl::StatusOr<int64_t> limit = MemoryLimitFromEnv();
  if (!limit.ok()) return limit.status();
  c->device_pool_ = MemoryPool(c.get(), c->device_, types->device, c->mapped_, *limit);
  c->staging_pool_ = MemoryPool(c.get(), c->device_, types->staging, /*host_visible=*/true);
  return c;
}

std::shared_ptr<Chunk> Context::AllocateFrom(MemoryPool& pool, int64_t bytes) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    Poll();
    if (std::shared_ptr<Chunk> chunk = pool.TryAllocate(bytes, completed_)) return chunk;
    // Out of device memory: first wait for the queued work, whose freed chunks can then be
    // reused; then also give back the cached blocks of other sizes.
    Submit();
    if (!in_flight_.empty()) WaitFor(in_flight_.back().seq);
    if (attempt == 1) {
      Poll();
      pool.Reclaim(completed_);
      pool.ReleaseCached();
    }
  }
  ThrowIfError(pool.OutOfMemory(name_, bytes));
  return nullptr;
}

std::shared_ptr<Chunk> Context::Allocate(int64_t bytes) {
  std::shared_ptr<Chunk> chunk;
  {
    std::lock_guard lock(mu_);
    chunk = AllocateFrom(device_pool_, std::max<int64_t>(bytes, 4));
  }
  chunk->CountIn(&tensor_memory_, bytes);
  return chunk;
}

int64_t Context::reserved_bytes() {
  std::lock_guard lock(mu_);
  return device_pool_.held();
}

void Context::Release(Block* block, int64_t offset, int64_t bytes) {
  std::lock_guard lock(mu_);
  MemoryPool& pool = block->mapped && !mapped_ ? staging_pool_ : device_pool_;
  // Work recorded so far may still read it: free after the batch it is in (or, with nothing
  // recorded, after the last submission).
  const uint64_t after = open_ != VK_NULL_HANDLE ? next_seq_ : next_seq_ - 1;
  pool.Release(block, offset, bytes, after);
}

Groups Context::Linear(int64_t items) const { return Exact(std::min<int64_t>(items, fill_groups_ * 256), 256); }

Groups Context::Exact(int64_t items, int64_t per_group) const {
  const int64_t groups = std::max<int64_t>(1, (items + per_group - 1) / per_group);
  Groups g;
  g.x = static_cast<uint32_t>(std::min<int64_t>(groups, max_groups_x_));
  g.y = static_cast<uint32_t>((groups + g.x - 1) / g.x);
  if (g.y > max_groups_y_) {
    ThrowIfError(absl::InvalidArgumentError(
        absl::StrCat("vulkan: ", items, " elements exceed what one launch on ", name_, " can cover")));
  }
  return g;
}

VkPipeline Context::Pipeline(int kernel) {
  VkPipeline& pipeline = pipelines_[kernel];
  if (pipeline != VK_NULL_HANDLE) return pipeline;
  const Functions& vk = Vk();
  const spirv::Code& code = spirv::kAll[kernel];
  VkShaderModuleCreateInfo module_info{
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = code.bytes, .pCode = code.words};
  VkShaderModule module;
  ThrowIfFailed(vk.vkCreateShaderModule(device_, &module_info, nullptr, &module), "vkCreateShaderModule");
  VkComputePipelineCreateInfo info{.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                   .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                             .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                                             .module = module,
                                             .pName = "main"},
                                   .layout = layout_};
  const VkResult r = vk.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &pipeline);
  vk.vkDestroyShaderModule(device_, module, nullptr);
  ThrowIfFailed(r, "vkCreateComputePipelines");
  return pipeline;
}

VkCommandBuffer Context::Open() {
  if (open_ != VK_NULL_HANDLE) return open_;
  const Functions& vk = Vk();
  if (spare_commands_.empty()) {
    VkCommandBufferAllocateInfo info{.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                     .commandPool = command_pool_,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                     .commandBufferCount = 1};
    VkCommandBuffer commands;
    ThrowIfFailed(vk.vkAllocateCommandBuffers(device_, &info, &commands), "vkAllocateCommandBuffers");
    spare_commands_.push_back(commands);
  }
  open_ = spare_commands_.back();
  spare_commands_.pop_back();
  VkCommandBufferBeginInfo begin{.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  ThrowIfFailed(vk.vkBeginCommandBuffer(open_, &begin), "vkBeginCommandBuffer");
  return open_;
}

// Every command may read what the one before wrote: a full compute/transfer barrier after each
// (kernels are rarely independent in a training step). The last one makes results visible to
// the host.
void Context::Barrier(VkCommandBuffer commands, bool to_host) {
  const VkPipelineStageFlags work = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  VkMemoryBarrier barrier{.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = static_cast<VkAccessFlags>(
                              to_host ? VK_ACCESS_HOST_READ_BIT
                                      : VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)};
  Vk().vkCmdPipelineBarrier(commands, work, to_host ? VK_PIPELINE_STAGE_HOST_BIT : work, 0, 1, &barrier, 0, nullptr, 0,
                            nullptr);
}

void Context::Launch(int kernel, const void* params, uint32_t params_size, Groups groups) {
  std::lock_guard lock(mu_);
  const Functions& vk = Vk();
  VkCommandBuffer commands = Open();
  vk.vkCmdBindPipeline(commands, VK_PIPELINE_BIND_POINT_COMPUTE, Pipeline(kernel));
  vk.vkCmdPushConstants(commands, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, params_size, params);
  vk.vkCmdDispatch(commands, groups.x, groups.y, groups.z);
  Barrier(commands, false);
  if (++open_ops_ >= kBatch) Submit();
}

void Context::Submit() {
  if (open_ == VK_NULL_HANDLE) return;
  const Functions& vk = Vk();
  Barrier(open_, true);
  ThrowIfFailed(vk.vkEndCommandBuffer(open_), "vkEndCommandBuffer");
  VkFence fence;
  if (spare_fences_.empty()) {
    VkFenceCreateInfo info{.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    ThrowIfFailed(vk.vkCreateFence(device_, &info, nullptr, &fence), "vkCreateFence");
  } else {
    fence = spare_fences_.back();
    spare_fences_.pop_back();
  }
  VkSubmitInfo submit{.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &open_};
  ThrowIfFailed(vk.vkQueueSubmit(queue_, 1, &submit, fence), "vkQueueSubmit");
  in_flight_.push_back({next_seq_++, open_, fence});
  open_ = VK_NULL_HANDLE;
  open_ops_ = 0;
  if (in_flight_.size() > kMaxInFlight) WaitFor(in_flight_.front().seq);
}

void Context::Poll() {
  const Functions& vk = Vk();
  while (!in_flight_.empty()) {
    Submission& s = in_flight_.front();
    const VkResult r = vk.vkGetFenceStatus(device_, s.fence);
    if (r == VK_NOT_READY) return;
    ThrowIfFailed(r, "vkGetFenceStatus");
    ThrowIfFailed(vk.vkResetFences(device_, 1, &s.fence), "vkResetFences");
    ThrowIfFailed(vk.vkResetCommandBuffer(s.commands, 0), "vkResetCommandBuffer");
    spare_fences_.push_back(s.fence);
    spare_commands_.push_back(s.commands);
    completed_ = s.seq;
    in_flight_.pop_front();
  }
}

void Context::WaitFor(uint64_t seq) {
  const Functions& vk = Vk();
  for (const Submission& s : in_flight_) {
    if (s.seq > seq) break;
    ThrowIfFailed(vk.vkWaitForFences(device_, 1, &s.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  }
  Poll();
}

void Context::Finish() {
  std::lock_guard lock(mu_);
  Submit();
  if (!in_flight_.empty()) WaitFor(in_flight_.back().seq);
}

void Context::Upload(const Chunk& dst, const void* src, int64_t bytes) {
  if (bytes == 0) return;
  if (std::byte* p = dst.mapped()) {
    std::memcpy(p, src, bytes);  // no queued work touches a fresh chunk
    return;
  }
  std::lock_guard lock(mu_);
  const std::shared_ptr<Chunk> staging = AllocateFrom(staging_pool_, bytes);
  std::memcpy(staging->mapped(), src, bytes);
  VkCommandBuffer commands = Open();
  VkBufferCopy region{.srcOffset = static_cast<VkDeviceSize>(staging->offset()),
                      .dstOffset = static_cast<VkDeviceSize>(dst.offset()),
                      .size = static_cast<VkDeviceSize>(bytes)};
  Vk().vkCmdCopyBuffer(commands, staging->buffer(), dst.buffer(), 1, &region);
  Barrier(commands, false);
  ++open_ops_;
}  // the staging chunk is released after the batch holding the copy

void Context::Download(const Chunk& src, int64_t offset, void* dst, int64_t bytes) {
  if (bytes == 0) return;
  std::lock_guard lock(mu_);
  if (const std::byte* p = src.mapped()) {
    Finish();
    std::memcpy(dst, p + offset, bytes);
    return;
  }
  const std::shared_ptr<Chunk> staging = AllocateFrom(staging_pool_, bytes);
  VkCommandBuffer commands = Open();
  VkBufferCopy region{.srcOffset = static_cast<VkDeviceSize>(src.offset() + offset),
                      .dstOffset = static_cast<VkDeviceSize>(staging->offset()),
                      .size = static_cast<VkDeviceSize>(bytes)};
  Vk().vkCmdCopyBuffer(commands, src.buffer(), staging->buffer(), 1, &region);
  Finish();
  std::memcpy(dst, staging->mapped(), bytes);
}

}  // namespace kiln::vulkan
