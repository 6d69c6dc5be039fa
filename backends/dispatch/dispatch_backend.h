// Dispatch: a backend chosen at run time. Its tensor holds the primitive of whichever
// compiled-in backend its DispatchDevice belongs to, and every op forwards to that backend, so
// one program can take `--devices=cpu:1` (or vulkan:0 in a Vulkan build) without being
// written per backend. Gradients come the usual way: Tensor<Autodiff<Dispatch>>.
#ifndef KILN_BACKENDS_DISPATCH_DISPATCH_BACKEND_H_
#define KILN_BACKENDS_DISPATCH_DISPATCH_BACKEND_H_

#include <variant>
#include <vector>

#include "backends/dispatch/dispatch_device.h"
#include "backends/registry.h"
#include "tensor/backend.h"

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
  template <class P>
  static Primitive Wrap(P p) {
    return Primitive{std::move(p)};
  }
  // f(Tag<B>, B's primitive) for the backend that holds p.
  template <class F>
  static decltype(auto) Visit(const Primitive& p, F&& f) {
    return std::visit(
        [&](const auto& x) -> decltype(auto) {
          return f(Tag<typename BackendOf<std::decay_t<decltype(x)>>::type>{}, x);
        },
        p.v);
  }
  template <class F>
  static Primitive Map(const Primitive& p, F&& f) {
    return Visit(p, [&](auto b, const auto& x) { return Wrap(f(b, x)); });
  }
  // The operand `other` as the same backend's primitive as `like`. Tensor<Dispatch> has
  // checked that both are on one device, so they are of one backend.
  template <class P>
  static const P& Same(const P&, const Primitive& other) {
    return std::get<P>(other.v);
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

  static Primitive from_data(const TensorData& d, const Device& dev) {
    return OnDevice(dev, [&](auto b, const auto& device) { return Wrap(decltype(b)::type::from_data(d, device)); });
  }
  static TensorData to_data(const Primitive& p) {
    return Visit(p, [](auto b, const auto& x) { return decltype(b)::type::to_data(x); });
  }
  static Primitive full(const Shape& s, Scalar v, DType t, const Device& dev) {
    return OnDevice(dev, [&](auto b, const auto& device) { return Wrap(decltype(b)::type::full(s, v, t, device)); });
  }
  // Within a backend; moving between backends goes through host memory.
  static Primitive to_device(const Primitive& p, const Device& dev) {
    return OnDevice(dev, [&](auto b, const auto& device) {
      using B = typename decltype(b)::type;
      if (const auto* same = std::get_if<typename B::Primitive>(&p.v)) return Wrap(B::to_device(*same, device));
      return Wrap(B::from_data(to_data(p), device));
    });
  }
  static Primitive cast(const Primitive& p, DType t) {
    return Map(p, [&](auto b, const auto& x) { return decltype(b)::type::cast(x, t); });
  }

  static Primitive unary(UnaryOp op, const Primitive& p) {
    return Map(p, [&](auto b, const auto& x) { return decltype(b)::type::unary(op, x); });
  }
  static Primitive binary(BinaryOp op, const Primitive& a, const Primitive& b) {
    return Map(a, [&](auto be, const auto& x) { return decltype(be)::type::binary(op, x, Same(x, b)); });
  }
  static Primitive where(const Primitive& c, const Primitive& a, const Primitive& b) {
    return Map(a, [&](auto be, const auto& x) { return decltype(be)::type::where(Same(x, c), x, Same(x, b)); });
  }
  static Primitive reduce(ReduceOp op, const Primitive& p, absl::Span<const int64_t> dims, bool keepdim) {
    return Map(p, [&](auto b, const auto& x) { return decltype(b)::type::reduce(op, x, dims, keepdim); });
  }
  static Primitive argmax(const Primitive& p, int64_t dim, bool keepdim) {
    return Map(p, [&](auto b, const auto& x) { return decltype(b)::type::argmax(x, dim, keepdim); });
  }
  static Primitive matmul(const Primitive& a, const Primitive& b) {
    return Map(a, [&](auto be, const auto& x) { return decltype(be)::type::matmul(x, Same(x, b)); });
  }
  static Primitive reshape(const Primitive& p, const Shape& s) {
    return Map(p, [&](auto b, const auto& x) { return decltype(b)::type::reshape(x, s); });
  }
  static Primitive permute(const Primitive& p, absl::Span<const int64_t> dims) {
    return Map(p, [&](auto b, const auto& x) { return decltype(b)::type::permute(x, dims); });
  }
  static Primitive expand(const Primitive& p, const Shape& s) {
    return Map(p, [&](auto b, const auto& x) { return decltype(b)::type::expand(x, s); });
  }
  static Primitive slice(const Primitive& p, int64_t dim, int64_t start, int64_t end, int64_t step) {
    return Map(p, [&](auto b, const auto& x) { return decltype(b)::type::slice(x, dim, start, end, step); });
  }
  static Primitive cat(absl::Span<const Primitive> parts, int64_t dim) {
    return Map(parts[0], [&](auto b, const auto& first) {
      std::vector<std::decay_t<decltype(first)>> same;
      for (const Primitive& p : parts) same.push_back(Same(first, p));
      return decltype(b)::type::cat(same, dim);
    });
  }
  static Primitive gather(const Primitive& p, int64_t dim, const Primitive& index) {
    return Map(p, [&](auto b, const auto& x) { return decltype(b)::type::gather(x, dim, Same(x, index)); });
  }
  static Primitive index_select(const Primitive& p, int64_t dim, const Primitive& index) {
    return Map(p, [&](auto b, const auto& x) { return decltype(b)::type::index_select(x, dim, Same(x, index)); });
  }
  static Primitive scatter_add(const Primitive& src, int64_t dim, const Primitive& index, const Shape& s) {
    return Map(src, [&](auto b, const auto& x) { return decltype(b)::type::scatter_add(x, dim, Same(x, index), s); });
  }

  // Fused kernels: the backend's own where it has one, else its composition (tensor/fused.h),
  // so Autodiff<Dispatch> always differentiates them in one step.
  static Primitive softmax_last(const Primitive& p, bool log, bool causal) {
    return Map(p, [&](auto b, const auto& x) {
      using Bx = typename decltype(b)::type;
      if constexpr (FusedSoftmax<Bx>)
        return Bx::softmax_last(x, log, causal);
      else
        return fused::composed::Softmax(Tensor<Bx>(x), log, causal).primitive();
    });
  }
  static Primitive softmax_last_backward(const Primitive& y, const Primitive& gy, bool log, bool causal) {
    return Map(y, [&](auto b, const auto& x) {
      using Bx = typename decltype(b)::type;
      if constexpr (FusedSoftmax<Bx>)
        return Bx::softmax_last_backward(x, Same(x, gy), log, causal);
      else
        return fused::composed::SoftmaxBackward(Tensor<Bx>(x), Tensor<Bx>(Same(x, gy)), log, causal).primitive();
    });
  }
  static NormForward<Primitive> norm_last(const Primitive& p, const Primitive* weight, const Primitive* bias,
                                          double eps, bool rms) {
    return Visit(p, [&](auto b, const auto& x) -> NormForward<Primitive> {
      using Bx = typename decltype(b)::type;
      using Px = std::decay_t<decltype(x)>;
      const Px* w = weight ? &Same(x, *weight) : nullptr;
      const Px* bi = bias ? &Same(x, *bias) : nullptr;
      if constexpr (FusedNorm<Bx>) {
        auto f = Bx::norm_last(x, w, bi, eps, rms);
        return {Wrap(f.y), Wrap(f.mean), Wrap(f.rstd)};
      } else {
        const Tensor<Bx> tw = w ? Tensor<Bx>(*w) : Tensor<Bx>(), tb = bi ? Tensor<Bx>(*bi) : Tensor<Bx>();
        auto f = fused::composed::Norm(Tensor<Bx>(x), w ? &tw : nullptr, bi ? &tb : nullptr, eps, rms);
        return {Wrap(f.y.primitive()), Wrap(f.mean.primitive()), Wrap(f.rstd.primitive())};
      }
    });
  }
  static NormBackward<Primitive> norm_last_backward(const Primitive& gy, const Primitive& p, const Primitive* weight,
                                                    const Primitive& mean, const Primitive& rstd, bool rms,
                                                    bool bias_grad) {
    return Visit(p, [&](auto b, const auto& x) -> NormBackward<Primitive> {
      using Bx = typename decltype(b)::type;
      using Px = std::decay_t<decltype(x)>;
      const Px* w = weight ? &Same(x, *weight) : nullptr;
      if constexpr (FusedNorm<Bx>) {
        auto d = Bx::norm_last_backward(Same(x, gy), x, w, Same(x, mean), Same(x, rstd), rms, bias_grad);
        return {Wrap(d.x_grad), Wrap(d.weight_grad), Wrap(d.bias_grad)};
      } else {
        const Tensor<Bx> tw = w ? Tensor<Bx>(*w) : Tensor<Bx>();
        auto d = fused::composed::NormGrad(Tensor<Bx>(Same(x, gy)), Tensor<Bx>(x), w ? &tw : nullptr,
                                           Tensor<Bx>(Same(x, mean)), Tensor<Bx>(Same(x, rstd)), rms, bias_grad);
        return {Wrap(d.x_grad.primitive()), Wrap(d.weight_grad.primitive()), Wrap(d.bias_grad.primitive())};
      }
    });
  }
  static Primitive gelu(const Primitive& p, bool tanh) {
    return Map(p, [&](auto b, const auto& x) {
      using Bx = typename decltype(b)::type;
      if constexpr (FusedGelu<Bx>)
        return Bx::gelu(x, tanh);
      else
        return fused::composed::Gelu(Tensor<Bx>(x), tanh).primitive();
    });
  }
  static Primitive gelu_backward(const Primitive& p, const Primitive& gy, bool tanh) {
    return Map(p, [&](auto b, const auto& x) {
      using Bx = typename decltype(b)::type;
      if constexpr (FusedGelu<Bx>)
        return Bx::gelu_backward(x, Same(x, gy), tanh);
      else
        return fused::composed::GeluBackward(Tensor<Bx>(x), Tensor<Bx>(Same(x, gy)), tanh).primitive();
    });
  }
  static CrossEntropyForward<Primitive> cross_entropy_rows(const Primitive& logits, const Primitive& targets,
                                                           int64_t ignore_index, double smoothing) {
    return Visit(logits, [&](auto b, const auto& x) -> CrossEntropyForward<Primitive> {
      using Bx = typename decltype(b)::type;
      if constexpr (FusedCrossEntropy<Bx>) {
        auto f = Bx::cross_entropy_rows(x, Same(x, targets), ignore_index, smoothing);
        return {Wrap(f.loss), Wrap(f.lse)};
      } else {
        auto f =
            fused::composed::CrossEntropyRows(Tensor<Bx>(x), Tensor<Bx>(Same(x, targets)), ignore_index, smoothing);
        return {Wrap(f.loss.primitive()), Wrap(f.lse.primitive())};
      }
    });
  }
  static Primitive cross_entropy_rows_backward(const Primitive& logits, const Primitive& targets, const Primitive& lse,
                                               const Primitive& g, int64_t ignore_index, double smoothing) {
    return Map(logits, [&](auto b, const auto& x) {
      using Bx = typename decltype(b)::type;
      if constexpr (FusedCrossEntropy<Bx>) {
        return Bx::cross_entropy_rows_backward(x, Same(x, targets), Same(x, lse), Same(x, g), ignore_index, smoothing);
      } else {
        return fused::composed::CrossEntropyRowsBackward(Tensor<Bx>(x), Tensor<Bx>(Same(x, targets)),
                                                         Tensor<Bx>(Same(x, lse)), Tensor<Bx>(Same(x, g)), ignore_index,
                                                         smoothing)
            .primitive();
      }
    });
  }
  static SgdStep<Primitive> sgd_update(const Primitive& p, const Primitive& g, const Primitive* velocity, double lr,
                                       double momentum, double weight_decay, bool nesterov) {
    return Visit(p, [&](auto b, const auto& x) -> SgdStep<Primitive> {
      using Bx = typename decltype(b)::type;
      using Px = std::decay_t<decltype(x)>;
      const Px* v = velocity ? &Same(x, *velocity) : nullptr;
      if constexpr (FusedSgd<Bx>) {
        auto s = Bx::sgd_update(x, Same(x, g), v, lr, momentum, weight_decay, nesterov);
        return {Wrap(s.param), Wrap(s.velocity)};
      } else {
        const Tensor<Bx> tv = v ? Tensor<Bx>(*v) : Tensor<Bx>();
        auto s = fused::composed::SgdUpdate(Tensor<Bx>(x), Tensor<Bx>(Same(x, g)), v ? &tv : nullptr, lr, momentum,
                                            weight_decay, nesterov);
        return {Wrap(s.param.primitive()), Wrap(s.velocity.primitive())};
      }
    });
  }
  static AdamWStep<Primitive> adamw_update(const Primitive& p, const Primitive& g, const Primitive* exp_avg,
                                           const Primitive* exp_avg_sq, double lr, double beta1, double beta2,
                                           double eps, double weight_decay, double c1, double c2) {
    return Visit(p, [&](auto b, const auto& x) -> AdamWStep<Primitive> {
      using Bx = typename decltype(b)::type;
      using Px = std::decay_t<decltype(x)>;
      const Px* m = exp_avg ? &Same(x, *exp_avg) : nullptr;
      const Px* v = exp_avg_sq ? &Same(x, *exp_avg_sq) : nullptr;
      if constexpr (FusedAdamW<Bx>) {
        auto s = Bx::adamw_update(x, Same(x, g), m, v, lr, beta1, beta2, eps, weight_decay, c1, c2);
        return {Wrap(s.param), Wrap(s.exp_avg), Wrap(s.exp_avg_sq)};
      } else {
        const Tensor<Bx> tm = m ? Tensor<Bx>(*m) : Tensor<Bx>(), tv = v ? Tensor<Bx>(*v) : Tensor<Bx>();
        auto s = fused::composed::AdamWUpdate(Tensor<Bx>(x), Tensor<Bx>(Same(x, g)), m ? &tm : nullptr,
                                              v ? &tv : nullptr, lr, beta1, beta2, eps, weight_decay, c1, c2);
        return {Wrap(s.param.primitive()), Wrap(s.exp_avg.primitive()), Wrap(s.exp_avg_sq.primitive())};
      }
    });
  }
};

static_assert(Backend<Dispatch>);
static_assert(FusedSoftmax<Dispatch> && FusedNorm<Dispatch> && FusedGelu<Dispatch> && FusedCrossEntropy<Dispatch>);
static_assert(FusedSgd<Dispatch> && FusedAdamW<Dispatch>);

}  // namespace kiln

#endif  // KILN_BACKENDS_DISPATCH_DISPATCH_BACKEND_H_
