// Cpu: the Eigen backend. Kernels are vectorised (Eigen arrays and GEMM, or loops the compiler
// vectorises) and split across the device's threads; tensors are strided views.
#ifndef KILN_BACKENDS_CPU_CPU_BACKEND_H_
#define KILN_BACKENDS_CPU_CPU_BACKEND_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/cpu/cpu_device.h"
#include "backends/cpu/strided_tensor.h"
#include "tensor/backend.h"
#include "tensor/fused_ops.h"
#include "tensor/memory_usage.h"
#include "tensor/tensor.h"

namespace kiln {

struct Cpu {
  using Device = CpuDevice;
  using Primitive = cpu::StridedTensor;

  static const char* Name() { return "cpu"; }
  // Logical devices exist once cpu::Configure (or the environment) made them.
  static absl::Status CheckDevice(const Device& d) { return cpu::CheckDevice(d); }
  static absl::Status Available() { return absl::OkStatus(); }
  // cpu:0..cpu:n-1, made if there are fewer (the cores shared fairly among them).
  static absl::StatusOr<std::vector<Device>> EnsureDevices(int n);
  static constexpr bool kDeviceOwnsAProcess = false;
  static constexpr bool kHalfTypes = true;  // bf16 and f16 kernels are done
  // The bytes the device's tensors hold (asked for, not the allocator's rounding or cache);
  // throws kiln::Error (CheckDevice's status) for a device that does not exist.
  static MemoryUsage memory_usage(const Device& d);
  static void reset_peak_memory(const Device& d);

  static const Shape& shape(const Primitive& p) { return p.shape; }
  static DType dtype(const Primitive& p) { return p.dtype; }
  static Device device(const Primitive& p) { return p.device; }

  // The ops, declared from their rows in tensor/op_table.h (signatures and preconditions there).
  KILN_DECLARE_BACKEND_OPS()
  // The fused kernels (backends/cpu/fused.cc) and optimizer updates (optimizer_kernels.cc).
  KILN_DECLARE_FUSED_KERNEL_OPS()
  KILN_DECLARE_FUSED_ATTENTION_OPS()  // attention.cc
  KILN_DECLARE_FUSED_LINEAR_OPS()     // matmul.cc
  KILN_DECLARE_FUSED_OPTIMIZER_OPS()

  // A row-major copy when `p` is a non-contiguous view; `p` itself otherwise.
  static Primitive contiguous(const Primitive& p);
};

static_assert(Backend<Cpu>);
static_assert(FusedSoftmax<Cpu> && FusedNorm<Cpu> && FusedGelu<Cpu> && FusedCrossEntropy<Cpu> && FusedAttention<Cpu> &&
              FusedLinear<Cpu>);
static_assert(FusedSgd<Cpu> && FusedAdamW<Cpu>);

using CpuTensor = Tensor<Cpu>;

}  // namespace kiln

#endif  // KILN_BACKENDS_CPU_CPU_BACKEND_H_
