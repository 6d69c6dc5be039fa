// From a list of run-time devices to a typed group. The whole list is checked before any
// device is touched: not empty, no duplicates, one backend, all autodiff or none, no autodiff
// inside autodiff, the backend compiled in (every compiled-in backend runs every op), every
// device existing. Then it is unwrapped into DeviceGroup<B> (plain devices) or
// DeviceGroup<Autodiff<B>> (autodiff devices) for exactly one compiled-in B, and handed to code
// written once per backend:
//
//   auto steps = MakeGroup(devices, Collective::kGradientSync, options, [&](auto group) {
//     return Train(*group);  // group: std::shared_ptr<DeviceGroup<Autodiff<B>>>, or of B
//   });
#ifndef KILN_DISTRIBUTED_GROUP_H_
#define KILN_DISTRIBUTED_GROUP_H_

#include <memory>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "backends/dispatch/dispatch_device.h"
#include "backends/registry.h"
#include "distributed/autodiff_group.h"
#include "distributed/collective.h"
#include "distributed/device_group.h"

namespace kiln::distributed {

namespace group_internal {
template <class... Bs>
struct AnyGroupOf {
  using type = std::variant<std::shared_ptr<DeviceGroup<Bs>>..., std::shared_ptr<DeviceGroup<Autodiff<Bs>>>...>;
};
}  // namespace group_internal

// One alternative per compiled-in backend, plain and autodiff.
using AnyGroup = CompiledBackends::Apply<group_internal::AnyGroupOf>::type;

// `op` is what the group is made for (Collective::kGradientSync for training); its name starts
// every error. Every rejection names the offending index, what was expected and what was found.
// InvalidArgument: an empty list, a duplicate, mixed backends, mixed autodiff, nested
// autodiff, a device that does not exist (a backend this build lacks is Parse's
// FailedPrecondition).
absl::Status ValidateDevices(absl::Span<const DispatchDevice> devices, Collective op);

absl::StatusOr<AnyGroup> MakeGroup(absl::Span<const DispatchDevice> devices, Collective op, GroupOptions options = {});

// The same, handing the typed group to f (a generic lambda: every alternative of AnyGroup
// must give one result type R); its result, or the reason there is no group.
template <class F>
auto MakeGroup(absl::Span<const DispatchDevice> devices, Collective op, GroupOptions options, F&& f)
    -> absl::StatusOr<std::invoke_result_t<F, std::shared_ptr<DeviceGroup<Cpu>>>> {
  using R = std::invoke_result_t<F, std::shared_ptr<DeviceGroup<Cpu>>>;
  absl::StatusOr<AnyGroup> group = MakeGroup(devices, op, std::move(options));
  if (!group.ok()) return group.status();
  return std::visit([&](auto& typed) -> absl::StatusOr<R> { return f(typed); }, *group);
}

// For training, which always records gradients: the devices as autodiff devices (plain ones
// are wrapped), validated for gradient sync, and f(std::shared_ptr<DeviceGroup<Autodiff<B>>>).
template <class F>
auto MakeTrainingGroup(absl::Span<const DispatchDevice> devices, GroupOptions options, F&& f)
    -> absl::StatusOr<std::invoke_result_t<F, std::shared_ptr<DeviceGroup<Autodiff<Cpu>>>>> {
  using R = std::invoke_result_t<F, std::shared_ptr<DeviceGroup<Autodiff<Cpu>>>>;
  std::vector<DispatchDevice> wrapped;
  for (const DispatchDevice& d : devices) wrapped.push_back(d.is_autodiff() ? d : DispatchDevice::Autodiff(d));
  absl::StatusOr<AnyGroup> group = MakeGroup(wrapped, Collective::kGradientSync, std::move(options));
  if (!group.ok()) return group.status();
  return std::visit(
      [&]<class G>(std::shared_ptr<DeviceGroup<G>>& typed) -> absl::StatusOr<R> {
        if constexpr (requires { typename G::Inner; }) {
          return f(typed);
        } else {
          return absl::InternalError("autodiff devices made a plain group");
        }
      },
      *group);
}

// The group when the caller knows its backend G (Cpu, Autodiff<Cpu>, ...): InvalidArgument
// when the devices are of another.
template <class G>
absl::StatusOr<std::shared_ptr<DeviceGroup<G>>> MakeGroupOf(absl::Span<const DispatchDevice> devices, Collective op,
                                                            GroupOptions options = {}) {
  absl::StatusOr<AnyGroup> group = MakeGroup(devices, op, std::move(options));
  if (!group.ok()) return group.status();
  if (auto* typed = std::get_if<std::shared_ptr<DeviceGroup<G>>>(&*group)) return *typed;
  return absl::InvalidArgumentError(absl::StrCat(CollectiveName(op), ": the devices (", devices[0].ToString(),
                                                 ", ...) make a group of another backend than ", G::Name()));
}

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_GROUP_H_
