// The one interface of a collective engine, the part of a device group that moves the data
// (the DeviceGroup<B> front end, device_group.h, is the same for all), and the slot an engine
// registers itself in. Each engine lives in its own folder (distributed/host_staged/,
// distributed/nccl/) and specialises EngineOf there for the backends it serves;
// distributed/engines.h includes every engine's folder. docs/adding_an_engine.md walks
// through adding one.
#ifndef KILN_DISTRIBUTED_ENGINE_H_
#define KILN_DISTRIBUTED_ENGINE_H_

#include <concepts>

#include "absl/status/statusor.h"
#include "distributed/collective_call.h"
#include "distributed/group_membership.h"
#include "distributed/group_options.h"
#include "tensor/tensor.h"

namespace kiln::distributed {

// What the front end asks of an engine E of backend B, which it constructs as
// E(const GroupMembership<B::Device>&, const GroupOptions&): a member's part of a call (the
// member checked, its tensor on its device; `consumed`: the caller gave the tensor up). An
// engine may also offer RunList(tensors, collective, op, root, per_member) to drive every
// member from one thread.
template <class E, class B>
concept CollectiveEngine = requires(E& e, const GroupMembership<typename B::Device>& members,
                                    const GroupOptions& options, int member, const Tensor<B>& t,
                                    const CollectiveCall& call) {
  E(members, options);
  { e.Run(member, t, call, true) } -> std::same_as<absl::StatusOr<Tensor<B>>>;
};

// The engine of backend B: `using type = ...;` in a specialisation, which the engine's own
// folder provides (a full one for one backend, as NCCL's for Cuda, or a constrained partial
// one for every backend that has what the engine needs, as the host-staged engine's).
template <class B>
struct EngineOf;

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_ENGINE_H_
