// Which engine moves a backend's collectives (the DeviceGroup<B> front end is the same for
// all): the host-staged one by default (CPU, Vulkan: the backend's CollectiveKernels<B>, in
// its own folder), NCCL for CUDA. A new engine is its own file plus a line here, under the
// #ifdef of the backend it serves (as KILN_WITH_CUDA guards the NCCL engine).
#ifndef KILN_DISTRIBUTED_ENGINES_H_
#define KILN_DISTRIBUTED_ENGINES_H_

#include <concepts>

#include "absl/status/statusor.h"
#include "distributed/collective_call.h"
#include "distributed/host_staged_engine.h"
#ifdef KILN_WITH_CUDA
#include "distributed/nccl_engine.h"
#endif

namespace kiln::distributed {

// What the front end asks of an engine: a member's part of a call (the member checked, its
// tensor on its device). An engine may also offer RunList(tensors, collective, op, root,
// per_member) to drive every member from one thread.
template <class E, class B>
concept CollectiveEngine = requires(E& e, int member, const Tensor<B>& t, const CollectiveCall& call) {
  { e.Run(member, t, call, true) } -> std::same_as<absl::StatusOr<Tensor<B>>>;
};

template <class B>
struct EngineOf {
  using type = HostStagedEngine<B>;
};
#ifdef KILN_WITH_CUDA
template <>
struct EngineOf<Cuda> {
  using type = NcclEngine;
};
#endif

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_ENGINES_H_
