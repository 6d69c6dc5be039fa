// The engines of kiln, listed once: each engine's folder, whose header registers the engine
// (EngineOf, engine.h) for the backends it serves: the host-staged one for every backend that
// stages its collectives (CPU, Vulkan), NCCL for CUDA where it is compiled in. A new engine is
// its folder plus a line here and a dep in BUILD.bazel (docs/adding_an_engine.md).
#ifndef KILN_DISTRIBUTED_ENGINES_H_
#define KILN_DISTRIBUTED_ENGINES_H_

#include "backends/registry.h"
#include "distributed/engine.h"
#include "distributed/host_staged/host_staged_engine.h"
#include "distributed/nccl/nccl.h"

namespace kiln::distributed {

namespace engines_internal {
template <class... Bs>
struct EveryBackendHasAnEngine {
  static constexpr bool value = (CollectiveEngine<typename EngineOf<Bs>::type, Bs> && ...);
};
}  // namespace engines_internal

// A compiled-in backend without an engine fails here ("incomplete type EngineOf<B>"), not in
// the first group made of it.
static_assert(CompiledBackends::Apply<engines_internal::EveryBackendHasAnEngine>::value,
              "every compiled-in backend needs a registered collective engine");

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_ENGINES_H_
