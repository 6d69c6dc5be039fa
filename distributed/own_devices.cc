#include "distributed/own_devices.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::distributed {
namespace {

// The index of a plain device whose backend owns its devices per process; -1 otherwise.
int OwningIndex(const DispatchDevice& plain) {
  return std::visit(
      [](const auto& d) -> int {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, AutodiffDevice>) {
          return -1;
        } else if constexpr (BackendOfDevice<D>::type::kDeviceOwnsAProcess) {
          return d.index();
        } else {
          return -1;
        }
      },
      plain.variant());
}

// `plain` with its index replaced, under as many autodiff wrappers as `like` has.
DispatchDevice Renumbered(const DispatchDevice& like, int index) {
  if (like.is_autodiff())
    return DispatchDevice::Autodiff(Renumbered(*std::get<AutodiffDevice>(like.variant()).inner, index));
  return std::visit(
      [&](const auto& d) -> DispatchDevice {
        using D = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<D, AutodiffDevice>) {
          return like;  // not reached: handled above
        } else {
          return DispatchDevice(D(index));
        }
      },
      like.variant());
}

}  // namespace

absl::StatusOr<std::vector<DispatchDevice>> OwnDevices(absl::Span<const DispatchDevice> devices,
                                                       const LaunchEnv& launch) {
  int width = 0;
  for (const DispatchDevice& d : devices) width = std::max(width, OwningIndex(d.plain()) + 1);
  std::vector<DispatchDevice> out(devices.begin(), devices.end());
  if (width == 0 || launch.local_rank == 0) return out;
  for (DispatchDevice& d : out) {
    const int index = OwningIndex(d.plain());
    if (index < 0) continue;
    const DispatchDevice own = Renumbered(d, launch.local_rank * width + index);
    if (absl::Status s = own.Check(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the process with local rank ", launch.local_rank, " of ",
                                                     launch.local_world_size, " trains on ", own.plain().ToString(),
                                                     " in place of ", d.plain().ToString(), " (each takes its own ",
                                                     own.backend(), " devices): ", s.message()));
    }
    d = own;
  }
  return out;
}

}  // namespace kiln::distributed
