// DispatchDevice: a device of any backend compiled into this build, chosen at run time
// ("cpu:1", "vulkan:0", "cuda:0"), optionally wrapped as an autodiff device. It is what users
// write in --devices and what distributed/ validates and unwraps into a typed device group.
#ifndef KILN_BACKENDS_DISPATCH_DISPATCH_DEVICE_H_
#define KILN_BACKENDS_DISPATCH_DISPATCH_DEVICE_H_

#include <memory>
#include <string>
#include <variant>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "backends/cpu/cpu_device.h"
#ifdef KILN_WITH_VULKAN
#include "backends/vulkan/vulkan_device.h"
#endif
#ifdef KILN_WITH_CUDA
#include "backends/cuda/cuda_device.h"
#endif

namespace kiln {

class DispatchDevice;

// A device whose tensors record gradients (Autodiff<B> over the inner device's backend).
struct AutodiffDevice {
  std::shared_ptr<const DispatchDevice> inner;  // never null
  friend bool operator==(const AutodiffDevice& a, const AutodiffDevice& b);
};

class DispatchDevice {
 public:
  // One alternative per backend compiled in, plus the autodiff wrapper.
  using Variant = std::variant<CpuDevice,
#ifdef KILN_WITH_VULKAN
                               VulkanDevice,
#endif
#ifdef KILN_WITH_CUDA
                               CudaDevice,
#endif
                               AutodiffDevice>;

  DispatchDevice() : v_(CpuDevice(0)) {}
  DispatchDevice(CpuDevice d) : v_(d) {}  // NOLINT: a CPU device is a dispatch device
#ifdef KILN_WITH_VULKAN
  DispatchDevice(VulkanDevice d) : v_(d) {}  // NOLINT: so is a Vulkan device
#endif
#ifdef KILN_WITH_CUDA
  DispatchDevice(CudaDevice d) : v_(d) {}  // NOLINT: so is a CUDA device
#endif
  static DispatchDevice Autodiff(DispatchDevice inner);

  // "cpu:0", "autodiff(cpu:1)". A backend this build lacks is FailedPrecondition naming the
  // --config that adds it; an unknown backend or a malformed string InvalidArgument; an index
  // past the devices that exist InvalidArgument naming those that do. Any string is safe to
  // give: no white space around it, a decimal index up to kMaxDeviceIndex, autodiff( at most
  // kMaxAutodiffWrappers deep (a group takes one; the second gets validation's message).
  static absl::StatusOr<DispatchDevice> Parse(absl::string_view text);
  // A comma-separated list, e.g. from --devices (white space around each device is allowed),
  // of at most kMaxListLength devices.
  static absl::StatusOr<std::vector<DispatchDevice>> ParseList(absl::string_view text);
  static constexpr int kMaxDeviceIndex = 1023;
  static constexpr int kMaxAutodiffWrappers = 2;
  static constexpr size_t kMaxListLength = 1024;

  const Variant& variant() const { return v_; }
  bool is_autodiff() const { return std::holds_alternative<AutodiffDevice>(v_); }
  // The backend's name ("cpu"); for an autodiff device, that of the device it wraps.
  std::string backend() const;
  std::string ToString() const;

  friend bool operator==(const DispatchDevice& a, const DispatchDevice& b);

 private:
  explicit DispatchDevice(Variant v) : v_(std::move(v)) {}
  // The device `name`:`index` of a compiled-in backend; `quoted` names it in errors.
  static absl::StatusOr<DispatchDevice> Plain(absl::string_view name, int index, const std::string& quoted);
  Variant v_;
};

}  // namespace kiln

#endif  // KILN_BACKENDS_DISPATCH_DISPATCH_DEVICE_H_
