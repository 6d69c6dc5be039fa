// The devices a process of a multi-process run takes from the list every process was given.
// A device of a backend whose devices each serve one process (a GPU: kDeviceOwnsAProcess)
// can serve only one of them, so the process with local rank l takes the l-th block of them,
// as wide as the highest index listed + 1: with cuda:0,cuda:1, local rank 1 trains on cuda:2
// and cuda:3 (torchrun users pick cuda:LOCAL_RANK by hand for the same reason). Other devices
// (logical CPU devices, Vulkan's) stay as they are: each process has its own.
#ifndef KILN_DISTRIBUTED_OWN_DEVICES_H_
#define KILN_DISTRIBUTED_OWN_DEVICES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/dispatch/dispatch_device.h"
#include "distributed/process/launch_env.h"

namespace kiln::distributed {

// The list with every owning device renumbered, autodiff wrappers kept. InvalidArgument when a
// renumbered device does not exist, naming the local rank and both devices.
absl::StatusOr<std::vector<DispatchDevice>> OwnDevices(absl::Span<const DispatchDevice> devices,
                                                       const LaunchEnv& launch);

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_OWN_DEVICES_H_
