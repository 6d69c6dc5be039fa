// Host-side helpers shared by the CUDA backend's op files: strided indices for kernels,
// launch error checks, and small device-to-host reads for error flags.
#ifndef KILN_BACKENDS_CUDA_LAUNCH_H_
#define KILN_BACKENDS_CUDA_LAUNCH_H_

#include <array>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "backends/cuda/context.h"
#include "backends/cuda/cuda_error.h"
#include "backends/cuda/kernels/strided_index.h"
#include "backends/cuda/strided_tensor.h"
#include "tensor/error.h"
#include "tensor/strided_view.h"

namespace kiln::cuda {

using strided::BroadcastStrides;

// The kernel index over `shape` for operands with these strides. A view whose dims do not
// merge into kMaxDims is rejected (Unimplemented) rather than walked wrongly.
template <int N>
StridedIndex<N> IndexFor(const Shape& shape, const std::array<Dims, N>& strides, const char* op) {
  std::array<const int64_t*, N> pointers;
  for (int k = 0; k < N; ++k) pointers[k] = strides[k].data();
  StridedIndex<N> index;
  if (!MakeStridedIndex<N>(static_cast<int>(shape.rank()), shape.dims().data(), pointers.data(), &index)) {
    throw Error(absl::UnimplementedError(absl::StrCat(op, ": the CUDA kernels walk at most ", kMaxDims,
                                                      " non-mergeable dims; shape ", shape.ToString(),
                                                      " needs more (make the tensor contiguous in steps first)")));
  }
  return index;
}

// Throws kiln::Error naming the op and device when a launch failed. The message is built only
// then: every op passes here, and formatting it each time was a measurable part of an op.
inline void CheckLaunch(cudaError_t error, const char* op, const CudaDevice& device) {
  if (error != cudaSuccess) [[unlikely]] {
    ThrowIfCuda(error, absl::StrCat(device.ToString(), ": ", op, " kernel"));
  }
}

// Makes the device's compute stream wait for the fences of these operands' buffers (set by
// collectives on the communication stream); nothing for the usual buffer without one. Every
// op calls it for its inputs before it queues work that reads them.
void Await(DeviceContext& context, std::initializer_list<const StridedTensor*> inputs);

// Copies `bytes` from device memory to `host` once everything queued on the device's stream
// has run (a synchronising read: error flags and index checks use it). `op` names the check
// in the error a CUDA graph capture gets (it cannot hold the wait).
void ReadBack(DeviceContext& context, const void* device_ptr, void* host, size_t bytes, const char* op);

// `src` (any strides) as a new row-major tensor of `dtype` (a cast when it differs).
StridedTensor CopyAs(const StridedTensor& src, DType dtype);

// Writes `src` into the view of `dst_base` with `dst_strides` (src's shape).
void CopyInto(const StridedTensor& src, void* dst_base, const Dims& dst_strides, DType dst_dtype);

}  // namespace kiln::cuda

#endif  // KILN_BACKENDS_CUDA_LAUNCH_H_
