// DispatchDevice: a device of any backend compiled into this build, chosen at run time
// ("cpu:1", "vulkan:0", "cuda:0"), optionally wrapped as an autodiff device. It is what users
// write in --devices and what distributed/ validates and unwraps into a typed device group.
// Its variant has one alternative per backend of backends/registry.h.
#ifndef KILN_BACKENDS_DISPATCH_DISPATCH_DEVICE_H_
#define KILN_BACKENDS_DISPATCH_DISPATCH_DEVICE_H_

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backends/registry.h"

namespace kiln {

class DispatchDevice;

// A device whose tensors record gradients (Autodiff<B> over the inner device's backend).
struct AutodiffDevice {
  std::shared_ptr<const DispatchDevice> inner;  // never null
  friend bool operator==(const AutodiffDevice& a, const AutodiffDevice& b);
};

class DispatchDevice {
 public:
  // One alternative per compiled-in backend, plus the autodiff wrapper.
  using Variant = CompiledBackends::DeviceVariant<AutodiffDevice>;

  DispatchDevice() : v_(CpuDevice(0)) {}
  template <class D>
  requires CompiledBackends::kHasDevice<D> DispatchDevice(D d)
      : v_(d) {}  // NOLINT: a device of a compiled-in backend is a dispatch device
  static DispatchDevice Autodiff(DispatchDevice inner);

  // "cpu:0", "autodiff(cpu:1)": the syntax only (whether the device exists is Check's, asked
  // when a group or tensor is made). A backend this build lacks is FailedPrecondition naming
  // the --config that adds it; an unknown backend or a malformed string InvalidArgument. Any
  // string is safe to give: no white space around it, a decimal index up to kMaxDeviceIndex,
  // autodiff( at most kMaxAutodiffWrappers deep (a group takes one; the second gets
  // validation's message).
  static absl::StatusOr<DispatchDevice> Parse(absl::string_view text);
  // A comma-separated list, e.g. from --devices (white space around each device is allowed),
  // of at most kMaxListLength devices.
  static absl::StatusOr<std::vector<DispatchDevice>> ParseList(absl::string_view text);
  static constexpr int kMaxDeviceIndex = 1023;
  static constexpr int kMaxAutodiffWrappers = 2;
  static constexpr size_t kMaxListLength = 1024;

  // OK if the device exists in this process (for an autodiff device: the one it wraps);
  // otherwise InvalidArgument naming those that do.
  absl::Status Check() const;

  const Variant& variant() const { return v_; }
  bool is_autodiff() const { return std::holds_alternative<AutodiffDevice>(v_); }
  // The device under every autodiff(...) wrapper (the device itself when there is none).
  const DispatchDevice& plain() const;
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
