// Per-device state of the CUDA backend: the compute stream every op of the device is queued
// on (so ops run in the order they are called and buffers can be reused in stream order), the
// device's caching allocator and its cuBLAS handle. Made on first use, never destroyed (CUDA
// may already be torn down when static destructors run).
#ifndef KILN_BACKENDS_CUDA_CONTEXT_H_
#define KILN_BACKENDS_CUDA_CONTEXT_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <mutex>

#include "backends/cuda/allocator.h"
#include "backends/cuda/cuda_device.h"

namespace kiln::cuda {

struct DeviceContext {
  int index = 0;
  cudaStream_t stream = nullptr;  // non-blocking: never serialised with the legacy stream
  int multiprocessors = 1;
  CachingAllocator* memory = nullptr;
  // cuBLAS calls on one handle are serialised (its workspace is per handle).
  cublasHandle_t blas = nullptr;
  std::mutex blas_mu;
};

// The context of `device`, made current on this thread (cudaSetDevice). Throws kiln::Error
// (InvalidArgument, see CheckDevice) for a device that does not exist.
DeviceContext& Context(const CudaDevice& device);

// The same context without touching the thread's current device, for what needs only its
// allocator or stream handle (a buffer's memory).
DeviceContext& Lookup(const CudaDevice& device);

// Pinned host memory for transfers, shared by all devices.
CachingAllocator& PinnedMemory();

// Blocks until the device's compute stream has run everything queued so far.
void Synchronize(const CudaDevice& device);

}  // namespace kiln::cuda

#endif  // KILN_BACKENDS_CUDA_CONTEXT_H_
