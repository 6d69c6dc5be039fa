// Dispatch: a backend chosen at run time. Its tensor holds the primitive of whichever
// compiled-in backend its DispatchDevice belongs to, and every op forwards to that backend, so
// one program can take `--devices=cpu:1` (or vulkan:0 in a Vulkan build) without being
// written per backend. Gradients come the usual way: Tensor<Autodiff<Dispatch>>.
#ifndef KILN_BACKENDS_DISPATCH_DISPATCH_BACKEND_H_
#define KILN_BACKENDS_DISPATCH_DISPATCH_BACKEND_H_

#include <optional>
#include <type_traits>
#include <variant>
#include <vector>

#include "backends/dispatch/dispatch_device.h"
#include "backends/registry.h"
#include "tensor/backend.h"
#include "tensor/fused.h"
#include "tensor/memory_usage.h"
#include "tensor/op_table.h"

namespace kiln {

struct Dispatch {
 public:
  using Device = DispatchDevice;
  // One alternative per compiled-in backend (backends/registry.h).
  struct Primitive {
    CompiledBackends::PrimitiveVariant v;
  };

 private:
  template <class B>
  struct Tag {
    using type = B;
  };
  // f(Tag<B>, B's primitive) for the backend that holds p.
  template <class F>
  static decltype(auto) Visit(const Primitive& p, F&& f) {
    return std::visit(
        [&](const auto& x) -> decltype(auto) {
          return f(Tag<typename BackendOf<std::decay_t<decltype(x)>>::type>{}, x);
        },
        p.v);
  }
  // f(Tag<B>, B's device) for a plain device that exists (a parsed device need not); an
  // autodiff device is the wrong tool here.
  template <class F>
  static Primitive OnDevice(const Device& dev, F&& f) {
    return std::visit(
        [&](const auto& d) -> Primitive {
          using D = std::decay_t<decltype(d)>;
          if constexpr (std::is_same_v<D, AutodiffDevice>) {
            ThrowInvalidArgument(
                "%s is an autodiff device; Tensor<Dispatch> takes plain devices (for "
                "gradients use Tensor<Autodiff<Dispatch>> on %s)",
                dev.ToString(), d.inner->ToString());
          } else {
            using B = typename BackendOfDevice<D>::type;
            ThrowIfError(B::CheckDevice(d));
            return f(Tag<B>{}, d);
          }
        },
        dev.variant());
  }

  // f.template operator()<B>(d) for the device d under every autodiff wrapper of `dev`.
  template <class F>
  static void OnPlainDevice(const Device& dev, F&& f) {
    CompiledBackends::AnyOf([&]<class B>() {
      const auto* d = std::get_if<typename B::Device>(&dev.plain().variant());
      if (d != nullptr) f.template operator()<B>(*d);
      return d != nullptr;
    });
  }

  // ---- Forwarding an op of the table ---------------------------------------------------------
  // f(Tag<B>) for the backend B of an op's first tensor or device argument. Tensor<Dispatch>
  // has checked that the other tensors are on the same device, so of the same backend.
  template <class F, class First, class... Rest>
  static auto OnOwner(F&& f, const First& first, const Rest&... rest) {
    if constexpr (std::is_same_v<First, Primitive>) {
      return Visit(first, [&](auto b, const auto&) { return f(b); });
    } else if constexpr (std::is_same_v<First, absl::Span<const Primitive>>) {
      return OnOwner(f, first[0]);
    } else if constexpr (std::is_same_v<First, Device>) {
      return OnDevice(first, [&](auto b, const auto&) { return f(b); });
    } else {
      return OnOwner(f, rest...);
    }
  }
  // An argument as backend B takes it: Dispatch's tensors and devices unwrapped, the rest as is.
  template <class B>
  static const typename B::Primitive& Unwrap(const Primitive& p) {
    return std::get<typename B::Primitive>(p.v);
  }
  template <class B>
  static const typename B::Primitive* Unwrap(const Primitive* p) {
    return p != nullptr ? &Unwrap<B>(*p) : nullptr;
  }
  template <class B>
  static std::vector<typename B::Primitive> Unwrap(absl::Span<const Primitive> parts) {
    std::vector<typename B::Primitive> same;
    for (const Primitive& p : parts) same.push_back(Unwrap<B>(p));
    return same;
  }
  template <class B>
  static const typename B::Device& Unwrap(const Device& d) {
    return std::get<typename B::Device>(d.variant());
  }
  template <class B, class T>
  static const T& Unwrap(const T& x) {
    return x;
  }
  // A backend's result as Dispatch's: its tensors wrapped (each of a NormForward, ...).
  static TensorData Wrap(TensorData d) { return d; }
  template <class R>
  static auto Wrap(R r) {
    if constexpr (requires { r.Map([](const auto& p) { return p; }); }) {
      return r.Map([](const auto& p) { return Primitive{p}; });
    } else {
      return Primitive{std::move(r)};
    }
  }
  // op(Tag<B>, the arguments as B's) on the backend B that holds the op's tensors, wrapped.
  template <class Op, class... Args>
  static auto Forward(Op op, const Args&... args) {
    return OnOwner([&](auto b) { return Wrap(op(b, Unwrap<typename decltype(b)::type>(args)...)); }, args...);
  }

  // A fused op computed by `composition` (one of kiln::fused::composed, on Tensor<B>) from B's
  // plain ops, for a backend B that lacks the op's group.
  template <class B>
  struct MaybeTensor {
    std::optional<Tensor<B>> t;
    operator const Tensor<B>*() const { return t ? &*t : nullptr; }  // NOLINT: stands for a pointer
  };
  template <class B, class T>
  static auto AsTensor(const T& x) {
    if constexpr (std::is_same_v<T, typename B::Primitive>) {
      return Tensor<B>(x);
    } else if constexpr (std::is_same_v<T, const typename B::Primitive*>) {
      return MaybeTensor<B>{x ? std::optional<Tensor<B>>(Tensor<B>(*x)) : std::nullopt};
    } else {
      return x;
    }
  }
  template <class B, class Composition, class... Args>
  static auto Composed(Composition composition, const Args&... args) {
    const auto result = composition(AsTensor<B>(args)...);
    if constexpr (requires { result.primitive(); }) {
      return result.primitive();
    } else {
      return result.Map([](const Tensor<B>& t) { return t.primitive(); });
    }
  }

 public:
  static const char* Name() { return "dispatch"; }

  static const Shape& shape(const Primitive& p) {
    return Visit(p, [](auto b, const auto& x) -> const Shape& { return decltype(b)::type::shape(x); });
  }
  static DType dtype(const Primitive& p) {
    return Visit(p, [](auto b, const auto& x) { return decltype(b)::type::dtype(x); });
  }
  static Device device(const Primitive& p) {
    return Visit(p, [](auto b, const auto& x) { return Device(decltype(b)::type::device(x)); });
  }

  // The device's backend's counts (an autodiff device's are those of the device it wraps).
  static MemoryUsage memory_usage(const Device& dev) {
    MemoryUsage usage;
    OnPlainDevice(dev, [&]<class B>(const typename B::Device& d) { usage = B::memory_usage(d); });
    return usage;
  }
  static void reset_peak_memory(const Device& dev) {
    OnPlainDevice(dev, [&]<class B>(const typename B::Device& d) { B::reset_peak_memory(d); });
  }

// The ops of tensor/op_table.h, each forwarded to the backend that holds its tensors.
#define KILN_DISPATCH_OP(Result, name, params, args)                                                           \
  static Result name params {                                                                                  \
    return Forward([](auto b, const auto&... a) { return decltype(b)::type::name(a...); }, KILN_OP_ARGS args); \
  }
  KILN_LOCAL_OPS(KILN_DISPATCH_OP)

  // Within a backend; moving between backends goes through host memory.
  static Primitive to_device(const Primitive& p, const Device& dev) {
    return OnDevice(dev, [&](auto b, const auto& device) {
      using B = typename decltype(b)::type;
      if (const auto* same = std::get_if<typename B::Primitive>(&p.v)) return Primitive{B::to_device(*same, device)};
      return Primitive{B::from_data(to_data(p), device)};
    });
  }

// Fused ops: the backend's own where it has the group, else its composition (tensor/fused.h), so
// Autodiff<Dispatch> always differentiates them in one step.
#define KILN_DISPATCH_FUSED_OP(Group, Result, name, params, args, composition) \
  static Result name params {                                                  \
    return Forward(                                                            \
        [](auto b, const auto&... a) {                                         \
          using B = typename decltype(b)::type;                                \
          if constexpr (Group<B>) {                                            \
            return B::name(a...);                                              \
          } else {                                                             \
            return Composed<B>(fused::composed::composition<B>, a...);         \
          }                                                                    \
        },                                                                     \
        KILN_OP_ARGS args);                                                    \
  }
  KILN_FUSED_OPS(KILN_DISPATCH_FUSED_OP)
#undef KILN_DISPATCH_OP
#undef KILN_DISPATCH_FUSED_OP
};

static_assert(Backend<Dispatch>);
static_assert(FusedSoftmax<Dispatch> && FusedNorm<Dispatch> && FusedGelu<Dispatch> && FusedCrossEntropy<Dispatch> &&
              FusedAttention<Dispatch> && FusedLinear<Dispatch>);
static_assert(FusedSgd<Dispatch> && FusedAdamW<Dispatch>);

}  // namespace kiln

#endif  // KILN_BACKENDS_DISPATCH_DISPATCH_BACKEND_H_
