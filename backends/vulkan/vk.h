// The Vulkan entry points kiln uses, loaded at run time from the system's loader
// (libvulkan.so.1), so a machine without Vulkan still runs every other backend and gets a
// clear status here instead of a failure to start.
#ifndef KILN_BACKENDS_VULKAN_VK_H_
#define KILN_BACKENDS_VULKAN_VK_H_

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

#include "absl/status/status.h"

namespace kiln::vulkan {

// One X per line: clang-format cannot lay out a list of macro calls, so it is left alone.
// clang-format off
#define KILN_VK_FUNCTIONS(X)                      \
  X(vkCreateInstance)                             \
  X(vkEnumeratePhysicalDevices)                   \
  X(vkGetPhysicalDeviceProperties)                \
  X(vkGetPhysicalDeviceFeatures2)                 \
  X(vkGetPhysicalDeviceQueueFamilyProperties)     \
  X(vkGetPhysicalDeviceMemoryProperties)          \
  X(vkCreateDevice)                               \
  X(vkGetDeviceQueue)                             \
  X(vkCreateCommandPool)                          \
  X(vkAllocateCommandBuffers)                     \
  X(vkBeginCommandBuffer)                         \
  X(vkEndCommandBuffer)                           \
  X(vkResetCommandBuffer)                         \
  X(vkCmdBindPipeline)                            \
  X(vkCmdPushConstants)                           \
  X(vkCmdDispatch)                                \
  X(vkCmdPipelineBarrier)                         \
  X(vkCmdCopyBuffer)                              \
  X(vkQueueSubmit)                                \
  X(vkCreateFence)                                \
  X(vkResetFences)                                \
  X(vkWaitForFences)                              \
  X(vkGetFenceStatus)                             \
  X(vkAllocateMemory)                             \
  X(vkFreeMemory)                                 \
  X(vkMapMemory)                                  \
  X(vkCreateBuffer)                               \
  X(vkGetBufferMemoryRequirements)                \
  X(vkBindBufferMemory)                           \
  X(vkDestroyBuffer)                              \
  X(vkGetBufferDeviceAddress)                     \
  X(vkCreateShaderModule)                         \
  X(vkDestroyShaderModule)                        \
  X(vkCreatePipelineLayout)                       \
  X(vkCreateComputePipelines)
// clang-format on

struct Functions {
#define KILN_VK_MEMBER(name) PFN_##name name = nullptr;
  KILN_VK_FUNCTIONS(KILN_VK_MEMBER)
#undef KILN_VK_MEMBER
};

// The loaded functions; valid once Instance() has succeeded.
const Functions& Vk();

// The process's Vulkan instance, created on first use; Unavailable (saying why) when there is
// no loader or the loader has no Vulkan 1.2 implementation.
absl::Status LoadInstance(VkInstance* instance);

// OK, or an Internal status naming the call and the VkResult.
absl::Status Check(VkResult result, const char* call);
// Throws kiln::Error for a failed call.
void ThrowIfFailed(VkResult result, const char* call);

}  // namespace kiln::vulkan

#endif  // KILN_BACKENDS_VULKAN_VK_H_
