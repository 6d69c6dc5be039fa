// Cuda: the CUDA backend. Tensors are strided views of device memory from a caching
// allocator; every op of a device is queued on that device's compute stream (so ops return
// before their kernels finish, and only to_data and error checks wait). Kernels are in
// kernels/*.cu, matmul is cuBLAS.
#ifndef KILN_BACKENDS_CUDA_CUDA_BACKEND_H_
#define KILN_BACKENDS_CUDA_CUDA_BACKEND_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/strided_tensor.h"
#include "tensor/backend.h"
#include "tensor/fused_ops.h"
#include "tensor/memory_usage.h"
#include "tensor/tensor.h"

namespace kiln {

struct Cuda {
  using Device = CudaDevice;
  using Primitive = cuda::StridedTensor;

  static const char* Name() { return "cuda"; }
  static absl::Status CheckDevice(const Device& d) { return cuda::CheckDevice(d); }
  static absl::Status Available() { return cuda::Available(); }
  // cuda:0..cuda:n-1; GPUs cannot be made, so fewer is ResourceExhausted naming how many there are.
  static absl::StatusOr<std::vector<Device>> EnsureDevices(int n);
  // A GPU serves one process: under a launcher each process takes its own (see distributed/).
  static constexpr bool kDeviceOwnsAProcess = true;
  static constexpr bool kHalfTypes = true;  // bf16 and f16 kernels are done
  // The bytes the device's tensors hold (asked for, including buffers a CUDA graph capture
  // makes; not the caching allocator's size classes or cache); throws kiln::Error for a
  // device that does not exist.
  static MemoryUsage memory_usage(const Device& d);
  static void reset_peak_memory(const Device& d);

  static const Shape& shape(const Primitive& p) { return p.shape; }
  static DType dtype(const Primitive& p) { return p.dtype; }
  static Device device(const Primitive& p) { return p.device; }

  // The ops, declared from their rows in tensor/op_table.h (signatures and preconditions there).
  KILN_DECLARE_BACKEND_OPS()
  // The fused kernels (fused.cc, kernels/fused.cu): f32 and f64, any strides (views are made
  // contiguous first). Optimizer updates (optimizer.cc): element-wise ops for f32 and f64, f32
  // with one rounding per result for bf16 and f16.
  KILN_DECLARE_FUSED_KERNEL_OPS()
  KILN_DECLARE_FUSED_OPTIMIZER_OPS()

  // A row-major copy when `p` is a non-contiguous view; `p` itself otherwise.
  static Primitive contiguous(const Primitive& p);
};

static_assert(Backend<Cuda>);
static_assert(FusedSoftmax<Cuda> && FusedNorm<Cuda> && FusedGelu<Cuda> && FusedCrossEntropy<Cuda>);

using CudaTensor = Tensor<Cuda>;

}  // namespace kiln

#endif  // KILN_BACKENDS_CUDA_CUDA_BACKEND_H_
