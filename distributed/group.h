// From a list of run-time devices to a typed group. The whole list is checked before any
// device is touched: not empty, no duplicates, one backend, all autodiff or none, no autodiff
// inside autodiff, the backend compiled in and able to run the op. Then it is unwrapped into
// DeviceGroup<B> (plain devices) or DeviceGroup<Autodiff<B>> (autodiff devices) for exactly
// one compiled-in B; std::visit on the result reaches code written once per backend template.
#ifndef KILN_DISTRIBUTED_GROUP_H_
#define KILN_DISTRIBUTED_GROUP_H_

#include <memory>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/dispatch/dispatch_device.h"
#include "distributed/autodiff_group.h"
#include "distributed/device_group.h"

namespace kiln::distributed {

// What a group will be asked to do (a backend may support only some of it).
enum class GroupOp { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kGradientSync };
const char* GroupOpName(GroupOp op);

// One alternative per compiled-in backend, plain and autodiff.
using AnyGroup = std::variant<std::shared_ptr<DeviceGroup<Cpu>>, std::shared_ptr<DeviceGroup<Autodiff<Cpu>>>
#ifdef KILN_WITH_VULKAN
                              ,
                              std::shared_ptr<DeviceGroup<Vulkan>>, std::shared_ptr<DeviceGroup<Autodiff<Vulkan>>>
#endif
#ifdef KILN_WITH_CUDA
                              ,
                              std::shared_ptr<DeviceGroup<Cuda>>, std::shared_ptr<DeviceGroup<Autodiff<Cuda>>>
#endif
                              >;

// Every rejection names the offending index, what was expected and what was found.
// InvalidArgument: an empty list, a duplicate, mixed backends, mixed autodiff, nested
// autodiff. FailedPrecondition: a backend this build lacks. Unimplemented: a backend that
// cannot run `op`.
absl::Status ValidateDevices(absl::Span<const DispatchDevice> devices, GroupOp op);

absl::StatusOr<AnyGroup> MakeGroup(absl::Span<const DispatchDevice> devices, GroupOp op, GroupOptions options = {});

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_GROUP_H_
