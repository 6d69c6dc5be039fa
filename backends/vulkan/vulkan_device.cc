#include "backends/vulkan/vulkan_device.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backends/vulkan/context.h"
#include "tensor/error.h"

namespace kiln {

std::string VulkanDevice::ToString() const { return absl::StrCat("vulkan:", index_); }

namespace vulkan {
namespace {

int VirtualDevicesFromEnv() {
  const char* value = std::getenv("KILN_VULKAN_VIRTUAL_DEVICES");
  int n = 0;
  return value != nullptr && absl::SimpleAtoi(value, &n) && n >= 1 ? n : 1;
}

// The physical devices, and a context per (physical device, virtual index) made on first use.
// Contexts live as long as the process (tensors may outlive any owner we could give them).
class Runtime {
 public:
  static Runtime& Get() {
    static Runtime* runtime = new Runtime;
    return *runtime;
  }

  absl::Status status() const { return status_; }
  int count() const {
    std::lock_guard lock(mu_);
    return static_cast<int>(physical_.size()) * virtual_;
  }

  absl::Status Configure(const Config& config) {
    if (config.virtual_devices < 1 || config.virtual_devices > 64) {
      return absl::InvalidArgumentError(
          absl::StrCat("vulkan::Configure: virtual_devices must be in 1..64, got ", config.virtual_devices));
    }
    std::lock_guard lock(mu_);
    virtual_ = config.virtual_devices;
    return absl::OkStatus();
  }

  absl::Status Check(const VulkanDevice& device) const {
    if (!status_.ok()) return status_;
    const int n = count();
    if (device.index() >= 0 && device.index() < n) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        device.ToString(), " does not exist: this process has ", n, " Vulkan device", n == 1 ? "" : "s",
        " (vulkan:0..vulkan:", n - 1, "); set KILN_VULKAN_VIRTUAL_DEVICES or call kiln::vulkan::Configure for more"));
  }

  absl::StatusOr<Context*> ContextOf(const VulkanDevice& device) {
    if (absl::Status s = Check(device); !s.ok()) return s;
    std::lock_guard lock(mu_);
    const int physical = device.index() / virtual_, copy = device.index() % virtual_;
    std::unique_ptr<Context>& slot = contexts_[{physical, copy}];
    if (slot == nullptr) {
      auto made = Context::Create(physical_[physical], force_staging_);
      if (!made.ok()) return made.status();
      slot = *std::move(made);
    }
    return slot.get();
  }

  const std::string& name(const VulkanDevice& device) const { return names_[device.index() / virtual_]; }
  const std::string& kind(const VulkanDevice& device) const { return kinds_[device.index() / virtual_]; }

 private:
  Runtime() : virtual_(VirtualDevicesFromEnv()) {
    const char* staging = std::getenv("KILN_VULKAN_STAGING");
    force_staging_ = staging != nullptr && std::string(staging) == "1";
    VkInstance instance;
    status_ = LoadInstance(&instance);
    if (!status_.ok()) return;
    const Functions& vk = Vk();
    uint32_t n = 0;
    status_ = vulkan::Check(vk.vkEnumeratePhysicalDevices(instance, &n, nullptr), "vkEnumeratePhysicalDevices");
    if (!status_.ok()) return;
    physical_.resize(n);
    vk.vkEnumeratePhysicalDevices(instance, &n, physical_.data());
    for (VkPhysicalDevice p : physical_) {
      VkPhysicalDeviceProperties props;
      vk.vkGetPhysicalDeviceProperties(p, &props);
      names_.push_back(props.deviceName);
      switch (props.deviceType) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: kinds_.push_back("discrete gpu"); break;
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: kinds_.push_back("integrated gpu"); break;
        case VK_PHYSICAL_DEVICE_TYPE_CPU: kinds_.push_back("cpu"); break;
        default: kinds_.push_back("other"); break;
      }
    }
    if (physical_.empty()) {
      status_ = absl::UnavailableError(
          "the Vulkan loader found no device; install a driver (on a machine without a GPU, "
          "apt-get install mesa-vulkan-drivers gives lavapipe)");
    }
  }

  mutable std::mutex mu_;
  absl::Status status_;
  std::vector<VkPhysicalDevice> physical_;
  std::vector<std::string> names_, kinds_;
  int virtual_;
  bool force_staging_ = false;
  std::map<std::pair<int, int>, std::unique_ptr<Context>> contexts_;
};

}  // namespace

absl::Status Configure(const Config& config) { return Runtime::Get().Configure(config); }

absl::Status Available() {
  Runtime& r = Runtime::Get();
  if (!r.status().ok()) return r.status();
  // The first device must also be usable (features, queue), not merely listed.
  auto context = r.ContextOf(VulkanDevice(0));
  return context.ok() ? absl::OkStatus() : context.status();
}

absl::StatusOr<int> DeviceCount() {
  Runtime& r = Runtime::Get();
  if (!r.status().ok()) return r.status();
  return r.count();
}

absl::Status CheckDevice(const VulkanDevice& device) { return Runtime::Get().Check(device); }

absl::StatusOr<std::string> Describe(const VulkanDevice& device) {
  Runtime& r = Runtime::Get();
  if (absl::Status s = r.Check(device); !s.ok()) return s;
  return absl::StrCat(r.name(device), ", ", r.kind(device));
}

Context& Context::Of(const VulkanDevice& device) {
  auto context = Runtime::Get().ContextOf(device);
  ThrowIfError(context.status());
  return **context;
}

}  // namespace vulkan
}  // namespace kiln
