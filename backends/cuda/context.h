// Per-device state of the CUDA backend: the compute stream every op of the device is queued
// on (so ops run in the order they are called and buffers can be reused in stream order), the
// device's caching allocator and its cuBLAS handle. Made on first use, never destroyed (CUDA
// may already be torn down when static destructors run).
#ifndef KILN_BACKENDS_CUDA_CONTEXT_H_
#define KILN_BACKENDS_CUDA_CONTEXT_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "backends/cuda/allocator.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/graph_pool.h"
#include "tensor/memory_usage.h"

namespace kiln::cuda {

struct DeviceContext {
  int index = 0;
  cudaStream_t stream = nullptr;  // non-blocking: never serialised with the legacy stream
  int multiprocessors = 1;
  CachingAllocator* memory = nullptr;
  // The bytes the device's tensor buffers hold: what they asked for, not the caching
  // allocator's size classes or cache (its GetStats has those).
  MemoryCounter tensor_memory;
  // cuBLAS calls on one handle are serialised (its workspace is per handle).
  cublasHandle_t blas = nullptr;
  std::mutex blas_mu;

  // Set while the compute stream is captured into a CUDA graph (graph.h): buffers then come
  // from the capture's pool, and ops that would wait for the device refuse to run (a capture
  // records work without running it). Read by every buffer made, hence the atomic.
  std::atomic<bool> capturing{false};
  std::mutex capture_mu;
  std::shared_ptr<GraphPool> capture_pool;  // under capture_mu, while capturing
  std::thread::id capture_thread;           // under capture_mu: the only thread that may use the device
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

// Throws kiln::Error (FailedPrecondition) naming `op` when `context`'s stream is being
// captured into a CUDA graph: for what waits for the device or the host (a read back, a host
// copy, a collective's agreement), which a capture cannot hold and a replay would skip.
// CaptureRefusal: the same as a status (OK when not capturing), for boundaries that return one.
absl::Status CaptureRefusal(const DeviceContext& context, const char* op);
[[noreturn]] void ThrowCaptureRefusal(const DeviceContext& context, const char* op);
inline void RefuseDuringCapture(const DeviceContext& context, const char* op) {
  if (context.capturing.load(std::memory_order_acquire)) [[unlikely]] {
    ThrowCaptureRefusal(context, op);
  }
}

}  // namespace kiln::cuda

#endif  // KILN_BACKENDS_CUDA_CONTEXT_H_
