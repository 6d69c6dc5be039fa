#include "backends/vulkan/vk.h"

#include <dlfcn.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "tensor/error.h"

namespace kiln::vulkan {
namespace {

Functions functions;

struct Loaded {
  absl::Status status;
  VkInstance instance = VK_NULL_HANDLE;
};

Loaded Load() {
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    return {
        absl::UnavailableError(absl::StrCat("no Vulkan loader: dlopen(libvulkan.so.1) failed (", dlerror(),
                                            "); install one, e.g. apt-get install libvulkan1 mesa-vulkan-drivers"))};
  }
  auto get = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (get == nullptr) return {absl::UnavailableError("libvulkan.so.1 has no vkGetInstanceProcAddr")};
  functions.vkCreateInstance = reinterpret_cast<PFN_vkCreateInstance>(get(VK_NULL_HANDLE, "vkCreateInstance"));
  VkApplicationInfo app{.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                        .pApplicationName = "kiln",
                        .pEngineName = "kiln",
                        .apiVersion = VK_API_VERSION_1_2};
  VkInstanceCreateInfo info{.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
  Loaded out;
  const VkResult r = functions.vkCreateInstance(&info, nullptr, &out.instance);
  if (r != VK_SUCCESS) {
    return {absl::UnavailableError(
        absl::StrCat("vkCreateInstance failed (VkResult ", r,
                     "): no Vulkan 1.2 driver is installed; on a "
                     "machine without a GPU, apt-get install mesa-vulkan-drivers gives lavapipe"))};
  }
#define KILN_VK_LOAD(name)                                                                       \
  functions.name = reinterpret_cast<PFN_##name>(get(out.instance, #name));                       \
  if (functions.name == nullptr) {                                                               \
    return {absl::UnavailableError("the Vulkan loader lacks " #name " (Vulkan 1.2 is needed)")}; \
  }
  KILN_VK_FUNCTIONS(KILN_VK_LOAD)
#undef KILN_VK_LOAD
  return out;
}

}  // namespace

const Functions& Vk() { return functions; }

absl::Status LoadInstance(VkInstance* instance) {
  static const Loaded loaded = Load();  // once per process, thread-safe
  *instance = loaded.instance;
  return loaded.status;
}

absl::Status Check(VkResult result, const char* call) {
  if (result == VK_SUCCESS) return absl::OkStatus();
  if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY) {
    return absl::ResourceExhaustedError(absl::StrCat(call, " failed: out of ",
                                                     result == VK_ERROR_OUT_OF_DEVICE_MEMORY ? "device" : "host",
                                                     " memory (VkResult ", result, ")"));
  }
  return absl::InternalError(absl::StrCat(call, " failed (VkResult ", result, ")"));
}

void ThrowIfFailed(VkResult result, const char* call) { ThrowIfError(Check(result, call)); }

}  // namespace kiln::vulkan

// LeakSanitizer: Mesa's lavapipe driver frees some small allocations only at driver unload,
// which a process that keeps its Vulkan devices until exit never reaches. Not kiln's memory.
extern "C" const char* __lsan_default_suppressions() { return "leak:libvulkan_lvp.so\n"; }
