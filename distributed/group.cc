#include "distributed/group.h"

#include "absl/strings/str_cat.h"
#include "backends/dispatch/dispatch_backend.h"
#include "distributed/timeout.h"

namespace kiln::distributed {

namespace {

// The group of backend B over `devices` (validated: all of B, all autodiff or none).
template <class B>
absl::StatusOr<AnyGroup> MakeTyped(absl::Span<const DispatchDevice> devices, GroupOptions options) {
  using D = typename B::Device;
  std::vector<D> list;
  for (const DispatchDevice& d : devices) {
    list.push_back(std::get<D>(d.plain().variant()));
  }
  if (devices[0].is_autodiff()) {
    return AnyGroup(std::make_shared<DeviceGroup<Autodiff<B>>>(std::move(list), options));
  }
  return AnyGroup(std::make_shared<DeviceGroup<B>>(std::move(list), options));
}

}  // namespace

absl::Status ValidateDevices(absl::Span<const DispatchDevice> devices, Collective op) {
  const char* what = CollectiveName(op);
  if (devices.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the device list is empty; give at least one device"));
  }
  const DispatchDevice& first = devices[0];
  for (size_t i = 0; i < devices.size(); ++i) {
    const DispatchDevice& d = devices[i];
    if (d.is_autodiff() && std::get<AutodiffDevice>(d.variant()).inner->is_autodiff()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": device ", i, " is ", d.ToString(),
                                                     ", autodiff inside autodiff; wrap a device in "
                                                     "autodiff once"));
    }
    if (d.is_autodiff() != first.is_autodiff()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": device ", i, " is ", d.ToString(), " but device 0 is ",
                                                     first.ToString(), "; a group's devices are all autodiff or none"));
    }
    if (d.backend() != first.backend()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": device ", i, " is ", d.ToString(), " (", d.backend(),
                                                     ") but device 0 is ", first.ToString(), " (", first.backend(),
                                                     "); a group's devices share one backend"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (devices[j] == d) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": device ", i, " is ", d.ToString(),
                                                       ", the same device as device ", j,
                                                       "; each device may appear once"));
      }
    }
  }
  // Every compiled-in backend runs every op (Vulkan stages through host memory, CUDA runs
  // NCCL); what is left is whether the devices exist.
  for (const DispatchDevice& d : devices) {
    if (absl::Status s = d.Check(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<AnyGroup> MakeGroup(absl::Span<const DispatchDevice> devices, Collective op, GroupOptions options) {
  if (absl::Status s = ValidateDevices(devices, op); !s.ok()) return s;
  if (absl::Status s = CheckTimeout(options.timeout, CollectiveName(op)); !s.ok()) return s;
  if (absl::Status s = CheckFlightRecorder(options, CollectiveName(op)); !s.ok()) return s;
  return std::visit(
      [&](const auto& d) -> absl::StatusOr<AnyGroup> {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, AutodiffDevice>) {
          return absl::InternalError("nested autodiff passed validation");
        } else {
          return MakeTyped<typename BackendOfDevice<D>::type>(devices, options);
        }
      },
      devices[0].plain().variant());
}

}  // namespace kiln::distributed
