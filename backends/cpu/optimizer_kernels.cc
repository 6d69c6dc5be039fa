// The optimizer updates of tensor/fused_ops.h on the CPU: each parameter read and written once
// (with its gradient and state), instead of 4 (SGD) to 12 (AdamW) element-wise kernels each
// allocating a tensor. Element-wise, so no result depends on the thread count.
#include <cmath>

#include "Eigen/Core"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels.h"
#include "tensor/half_in_f32.h"

namespace kiln {

using cpu::ForFloat;
using cpu::StridedTensor;

namespace {

template <class T>
using Vec = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstVec = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// body(begin, n) over chunks of the parameter's elements, split across the device's threads.
template <class F>
void Chunks(const CpuDevice& device, int64_t n, F body) {
  cpu::ParallelFor(device, n, 1 << 14, [&](int64_t begin, int64_t end) { body(begin, end - begin); });
}

template <class T>
struct AdamWConstants {
  T b1, b2, one_b1, one_b2, keep, step, eps, c2;
};
template <class T>
struct AdamWArrays {
  const T *p, *g, *m0, *v0;
  T *m, *v, *out;
};

// A plain loop, not Eigen: Eigen's vector sqrt of floats is an approximation its scalar tail
// does not share, which would make an element's update depend on its position (so a sharded
// member's chunk would differ from the whole parameter's step). The compiler vectorises this
// with exact sqrt and division, and its scalar tail computes alike.
template <class T, bool kFirst, bool kDecays>
void AdamWLoop(const AdamWArrays<T>& a, const AdamWConstants<T> k, int64_t n) {  // k by value: no aliasing
  const T* __restrict p = a.p;
  const T* __restrict g = a.g;
  const T* __restrict m0 = a.m0;
  const T* __restrict v0 = a.v0;
  T* __restrict m = a.m;
  T* __restrict v = a.v;
  T* __restrict out = a.out;
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i];
    const T mi = kFirst ? k.one_b1 * gi : k.b1 * m0[i] + k.one_b1 * gi;
    const T vi = kFirst ? k.one_b2 * gi * gi : k.b2 * v0[i] + k.one_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    out[i] = (kDecays ? p[i] * k.keep : p[i]) - k.step * mi / (std::sqrt(vi / k.c2) + k.eps);
  }
}

}  // namespace

SgdStep<Cpu::Primitive> Cpu::sgd_update(const Primitive& p, const Primitive& g, const Primitive* velocity, double lr,
                                        double momentum, double weight_decay, bool nesterov) {
  if (IsHalf(p.dtype)) return HalfInF32<Cpu>::sgd_update(p, g, velocity, lr, momentum, weight_decay, nesterov);
  const StridedTensor pc = contiguous(p), gc = contiguous(g);
  const StridedTensor vc = velocity ? contiguous(*velocity) : StridedTensor{};
  SgdStep<Primitive> out{StridedTensor::Empty(p.shape, p.dtype, p.device), {}};
  if (momentum != 0) out.velocity = StridedTensor::Empty(p.shape, p.dtype, p.device);
  ForFloat(p.dtype, [&](auto t) {
    using T = decltype(t);
    const T m = T(momentum), wd = T(weight_decay), rate = T(lr);
    Chunks(p.device, p.shape.numel(), [&](int64_t at, int64_t n) {
      const ConstVec<T> pv(pc.data<T>() + at, n), gv(gc.data<T>() + at, n);
      Vec<T> param(out.param.mutable_data<T>() + at, n);
      const auto update = [&](const auto& d) {  // d: the gradient with its weight decay
        if (momentum == 0) {
          param = pv - rate * d;
          return;
        }
        Vec<T> v(out.velocity.template mutable_data<T>() + at, n);
        if (velocity) {
          v = m * ConstVec<T>(vc.template data<T>() + at, n) + d;
        } else {
          v = d;
        }
        if (nesterov) {
          param = pv - rate * (d + m * v);
        } else {
          param = pv - rate * v;
        }
      };
      if (weight_decay != 0) {
        update(gv + wd * pv);
      } else {
        update(gv);
      }
    });
  });
  return out;
}

AdamWStep<Cpu::Primitive> Cpu::adamw_update(const Primitive& p, const Primitive& g, const Primitive* exp_avg,
                                            const Primitive* exp_avg_sq, double lr, double beta1, double beta2,
                                            double eps, double weight_decay, double c1, double c2) {
  if (IsHalf(p.dtype))
    return HalfInF32<Cpu>::adamw_update(p, g, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, c1, c2);
  const StridedTensor pc = contiguous(p), gc = contiguous(g);
  const StridedTensor mc = exp_avg ? contiguous(*exp_avg) : StridedTensor{};
  const StridedTensor vc = exp_avg_sq ? contiguous(*exp_avg_sq) : StridedTensor{};
  AdamWStep<Primitive> out{StridedTensor::Empty(p.shape, p.dtype, p.device),
                           StridedTensor::Empty(p.shape, p.dtype, p.device),
                           StridedTensor::Empty(p.shape, p.dtype, p.device)};
  ForFloat(p.dtype, [&](auto t) {
    using T = decltype(t);
    const AdamWConstants<T> k{T(beta1),   T(beta2), T(1 - beta1), T(1 - beta2), T(1 - lr * weight_decay),
                              T(lr / c1), T(eps),   T(c2)};
    Chunks(p.device, p.shape.numel(), [&](int64_t at, int64_t n) {
      const AdamWArrays<T> a{pc.data<T>() + at,
                             gc.data<T>() + at,
                             exp_avg ? mc.data<T>() + at : nullptr,
                             exp_avg_sq ? vc.data<T>() + at : nullptr,
                             out.exp_avg.mutable_data<T>() + at,
                             out.exp_avg_sq.mutable_data<T>() + at,
                             out.param.mutable_data<T>() + at};
      const bool first = exp_avg == nullptr, decays = weight_decay != 0;
      if (first && decays) AdamWLoop<T, true, true>(a, k, n);
      if (first && !decays) AdamWLoop<T, true, false>(a, k, n);
      if (!first && decays) AdamWLoop<T, false, true>(a, k, n);
      if (!first && !decays) AdamWLoop<T, false, false>(a, k, n);
    });
  });
  return out;
}

}  // namespace kiln
