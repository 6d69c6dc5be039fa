// cuda::StridedTensor: the CUDA backend's primitive, the shared StridedArray
// (tensor/strided_array.h) over a buffer of device memory.
#ifndef KILN_BACKENDS_CUDA_STRIDED_TENSOR_H_
#define KILN_BACKENDS_CUDA_STRIDED_TENSOR_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "backends/cuda/allocator.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/graph_pool.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"
#include "tensor/strided_array.h"

namespace kiln {
namespace cuda {

struct DeviceContext;  // context.h

// Device memory from the device's caching allocator, returned to it when the last view goes.
// The return is stream-ordered (see allocator.h), so it is safe while kernels still run.
// While the device's stream is captured into a CUDA graph, buffers come from the capture's
// GraphPool instead and go back to it (graph_pool.h).
class DeviceBuffer {
 public:
  DeviceBuffer(const CudaDevice& device, int64_t nbytes);  // throws kiln::Error
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::byte* data() const { return static_cast<std::byte*>(block_.ptr); }
  int64_t nbytes() const { return nbytes_; }

  // An event on another stream (a collective's, on the communication stream) after which
  // this buffer is final: every later op waits for it on the compute stream (see Await in
  // launch.h), and the memory is not reused before it has passed. Null for buffers only the
  // compute stream touches, which is nearly all.
  using Event = std::shared_ptr<CUevent_st>;
  void SetFence(Event event);
  Event fence() const;

 private:
  DeviceContext* context_;
  std::shared_ptr<GraphPool> pool_;  // set for buffers made during a capture: they keep it alive
  CachingAllocator::Block block_;
  int64_t nbytes_;
  mutable std::mutex mu_;
  Event fence_;
  // Set once fence_ is: every op asks for its inputs' fences, nearly always of buffers that
  // have none, and this answers that without the mutex.
  std::atomic<bool> has_fence_{false};
};

using StridedTensor = StridedArray<DeviceBuffer, CudaDevice>;

}  // namespace cuda

// Allocates the DeviceBuffer (strided_tensor.cc).
template <>
cuda::StridedTensor cuda::StridedTensor::Empty(const Shape& shape, DType dtype, const CudaDevice& device);

}  // namespace kiln

#endif  // KILN_BACKENDS_CUDA_STRIDED_TENSOR_H_
