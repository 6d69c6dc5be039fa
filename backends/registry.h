// The backends of kiln, listed once: those it knows (and the Bazel config that compiles each
// in) and those compiled into this build. Everything kept per backend elsewhere is derived
// from these two lists: Dispatch's primitive, DispatchDevice's device variant and its parsing,
// the backend of a primitive or a device, distributed's AnyGroup, the typed test lists. Outside
// this file, each backend's own folder and BUILD selects, per-backend #ifdefs remain in
// distributed/nccl/nccl.h (the NCCL engine's folder, for CUDA) and a few CUDA-specific tests and
// benchmarks.
//
// A registered backend B (see RegisteredBackend) has, besides the tensor operations of the
// Backend concept, a Device constructible from an index, a Primitive, and
//   static const char* Name();                    // "cpu": the backend part of "cpu:0"
//   static absl::Status CheckDevice(const Device&);  // OK, or why the device does not exist
//   static absl::Status Available();              // whether the backend can run here at all
//   static absl::StatusOr<std::vector<Device>> EnsureDevices(int n);  // the first n, made if
//                                                 // the backend can (logical devices)
//   static constexpr bool kDeviceOwnsAProcess;    // a device serves one process (a GPU)
//   static constexpr bool kHalfTypes;             // bf16 and f16 run (the typed tests add them)
//   static MemoryUsage memory_usage(const Device&);  // current and peak bytes of the device's
//                                                 // tensor buffers (tensor/memory_usage.h)
//   static void reset_peak_memory(const Device&);   // the peak restarts from the current bytes
#ifndef KILN_BACKENDS_REGISTRY_H_
#define KILN_BACKENDS_REGISTRY_H_

#include <concepts>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/cpu/collective_kernels.h"
#include "backends/cpu/cpu_backend.h"
#include "tensor/memory_usage.h"
#ifdef KILN_WITH_VULKAN
#include "backends/vulkan/collective_kernels.h"
#include "backends/vulkan/vulkan_backend.h"
#endif
#ifdef KILN_WITH_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace kiln {

template <class B>
concept RegisteredBackend = requires(const typename B::Device& d) {
  typename B::Primitive;
  { B::Name() } -> std::convertible_to<const char*>;
  { B::CheckDevice(d) } -> std::same_as<absl::Status>;
  { B::Available() } -> std::same_as<absl::Status>;
  { B::EnsureDevices(1) } -> std::same_as<absl::StatusOr<std::vector<typename B::Device>>>;
  { B::kDeviceOwnsAProcess } -> std::convertible_to<bool>;
  { B::kHalfTypes } -> std::convertible_to<bool>;
  { B::memory_usage(d) } -> std::same_as<MemoryUsage>;
  { B::reset_peak_memory(d) } -> std::same_as<void>;
  typename B::Device;
  requires std::constructible_from<typename B::Device, int>;
};

namespace registry_internal {
// The position of the first true in `matches` (their count if none).
template <bool... matches>
constexpr size_t FirstTrue() {
  size_t i = 0;
  ((matches ? true : (++i, false)) || ...);
  return i;
}
// Whether T is exactly one of Us.
template <class T, class... Us>
constexpr bool Once() {
  return (int{std::is_same_v<T, Us>} + ...) == 1;
}
}  // namespace registry_internal

// A list of backends and what is derived from it.
template <RegisteredBackend... Bs>
struct BackendList {
  // OfPrimitive and Dispatch's variant tell a tensor's backend by its primitive type.
  static_assert((registry_internal::Once<typename Bs::Primitive, typename Bs::Primitive...>() && ...),
                "every backend needs a primitive type of its own");
  // F<B...>: e.g. a variant over something of every backend.
  template <template <class...> class F>
  using Apply = F<Bs...>;
  // std::variant<B's primitive...>.
  using PrimitiveVariant = std::variant<typename Bs::Primitive...>;
  // std::variant<B's device..., Extra...>.
  template <class... Extra>
  using DeviceVariant = std::variant<typename Bs::Device..., Extra...>;
  // The backend of primitive P / of device D (the first, if several share one).
  template <class P>
  using OfPrimitive = std::tuple_element_t<registry_internal::FirstTrue<std::is_same_v<typename Bs::Primitive, P>...>(),
                                           std::tuple<Bs...>>;
  template <class D>
  using OfDevice = std::tuple_element_t<registry_internal::FirstTrue<std::is_same_v<typename Bs::Device, D>...>(),
                                        std::tuple<Bs...>>;
  template <class X>
  static constexpr bool kHas = (std::is_same_v<X, Bs> || ...);
  template <class D>
  static constexpr bool kHasDevice = (std::is_same_v<typename Bs::Device, D> || ...);
  // Whether a backend of this name is in the list.
  static bool Has(std::string_view name) { return ((name == Bs::Name()) || ...); }
  // f.template operator()<B>() for each B in order until one returns true; whether one did.
  template <class F>
  static bool AnyOf(F&& f) {
    return (f.template operator()<Bs>() || ...);
  }
};

// Every backend compiled into this build, the CPU one first (the default device's).
using CompiledBackends = BackendList<Cpu
#ifdef KILN_WITH_VULKAN
                                     ,
                                     Vulkan
#endif
#ifdef KILN_WITH_CUDA
                                     ,
                                     Cuda
#endif
                                     >;

// Every backend kiln has, compiled in or not: the name its devices use and the --config that
// compiles it in (null: always built).
struct KnownBackend {
  const char* name;
  const char* config;
};
inline constexpr KnownBackend kKnownBackends[] = {{"cpu", nullptr}, {"vulkan", "vulkan"}, {"cuda", "cuda"}};

// The compiled-in backend whose primitive is P / whose device is D.
template <class P>
struct BackendOf {
  using type = CompiledBackends::OfPrimitive<P>;
};
template <class D>
struct BackendOfDevice {
  using type = CompiledBackends::OfDevice<D>;
};

}  // namespace kiln

#endif  // KILN_BACKENDS_REGISTRY_H_
