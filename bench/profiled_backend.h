// Profiled<B>: backend B with every op of tensor/op_table.h timed into the op profile
// (bench/op_profile.h) while one is recording. It shares B's tensors and devices, so a
// Tensor<Autodiff<Profiled<Cpu>>> model runs exactly Cpu's kernels, and Cpu's collective
// kernels serve its device groups (so DataParallel runs on it as on Cpu). Only for
// measurements: a step's breakdown, never the timed steps themselves.
#ifndef KILN_BENCH_PROFILED_BACKEND_H_
#define KILN_BENCH_PROFILED_BACKEND_H_

#include <vector>

#include "backends/cpu/collective_kernels.h"
#include "backends/cpu/cpu_backend.h"
#include "bench/op_profile.h"
#include "tensor/backend.h"
#include "tensor/fused_ops.h"
#include "tensor/memory_usage.h"
#include "tensor/op_table.h"

namespace kiln {

template <Backend B>
struct Profiled {
  using Inner = B;
  using Device = typename B::Device;
  using Primitive = typename B::Primitive;

  static const char* Name() { return B::Name(); }
  static absl::Status CheckDevice(const Device& d) { return B::CheckDevice(d); }
  static absl::Status Available() { return B::Available(); }
  static auto EnsureDevices(int n) { return B::EnsureDevices(n); }
  static constexpr bool kDeviceOwnsAProcess = B::kDeviceOwnsAProcess;
  static constexpr bool kHalfTypes = B::kHalfTypes;
  static MemoryUsage memory_usage(const Device& d) { return B::memory_usage(d); }
  static void reset_peak_memory(const Device& d) { B::reset_peak_memory(d); }

  static const Shape& shape(const Primitive& p) { return B::shape(p); }
  static DType dtype(const Primitive& p) { return B::dtype(p); }
  static Device device(const Primitive& p) { return B::device(p); }

  static Primitive contiguous(const Primitive& p) {
    bench::OpTimer timer(bench::OpId::k_contiguous);
    return B::contiguous(p);
  }

#define KILN_PROFILED_OP(Result, name, params, args) \
  static Result name params {                        \
    bench::OpTimer timer(bench::OpId::k_##name);     \
    return B::name(KILN_OP_ARGS args);               \
  }
  KILN_CORE_OPS(KILN_PROFILED_OP)
#undef KILN_PROFILED_OP

  // A fused group only where B has it (else Profiled<B> lacks it too, and callers compose).
#define KILN_PROFILED_FUSED_OP(Group, Result, name, params, args, composition) \
  static Result name params requires Group<B> {                                \
    bench::OpTimer timer(bench::OpId::k_##name);                               \
    return B::name(KILN_OP_ARGS args);                                         \
  }
  KILN_FUSED_OPS(KILN_PROFILED_FUSED_OP)
#undef KILN_PROFILED_FUSED_OP
};

static_assert(Backend<Profiled<Cpu>>);
static_assert(FusedSoftmax<Profiled<Cpu>> && FusedNorm<Profiled<Cpu>> && FusedGelu<Profiled<Cpu>> &&
              FusedCrossEntropy<Profiled<Cpu>> && FusedAdamW<Profiled<Cpu>> && FusedSgd<Profiled<Cpu>>);

// Its collectives are Cpu's: the same tensors on the same devices.
template <>
struct CollectiveKernels<Profiled<Cpu>> : CollectiveKernels<Cpu> {};

}  // namespace kiln

#endif  // KILN_BENCH_PROFILED_BACKEND_H_
