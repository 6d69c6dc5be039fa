// Vulkan devices vulkan:0 .. vulkan:N-1. vulkan:N is the N-th physical device the Vulkan
// loader reports; with KILN_VULKAN_VIRTUAL_DEVICES=K (or vulkan::Configure) every physical
// device is exposed K times, each a separate logical device with its own queue, so data
// parallelism over several devices can be run and tested on one GPU (or on lavapipe).
#ifndef KILN_BACKENDS_VULKAN_VULKAN_DEVICE_H_
#define KILN_BACKENDS_VULKAN_VULKAN_DEVICE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln {

class VulkanDevice {
 public:
  constexpr VulkanDevice() = default;
  constexpr explicit VulkanDevice(int index) : index_(index) {}
  int index() const { return index_; }
  std::string ToString() const;  // "vulkan:0"
  friend bool operator==(const VulkanDevice&, const VulkanDevice&) = default;

 private:
  int index_ = 0;
};

namespace vulkan {

struct Config {
  int virtual_devices = 1;  // logical devices per physical device
};

// Sets how many devices each physical device exposes (default: KILN_VULKAN_VIRTUAL_DEVICES,
// else 1). Devices already in use keep working; their indices may change meaning, so call
// this before creating tensors.
absl::Status Configure(const Config& config);

// OK when a Vulkan loader and at least one usable device exist; otherwise Unavailable saying
// why (no loader, no device, or a device lacking what kiln needs).
absl::Status Available();
absl::StatusOr<int> DeviceCount();

// OK if `device` exists, otherwise a status naming the devices that do.
absl::Status CheckDevice(const VulkanDevice& device);

// The physical device's name and kind, e.g. "llvmpipe (LLVM 15.0.6, 256 bits), cpu".
absl::StatusOr<std::string> Describe(const VulkanDevice& device);

}  // namespace vulkan
}  // namespace kiln

#endif  // KILN_BACKENDS_VULKAN_VULKAN_DEVICE_H_
