// CapturedGraph: the work one piece of host code queues on a device's compute stream,
// recorded once as a CUDA graph and replayed with a single launch, so a replay costs the host
// one cudaGraphLaunch instead of a launch per op. What a replay reads and writes is where the
// capture found it: inputs must be copied into the buffers the capture read (WriteInto), and
// every buffer made during capture comes from the graph's own GraphPool and stays reserved
// for the graph's lifetime (graph_pool.h).
#ifndef KILN_BACKENDS_CUDA_GRAPH_H_
#define KILN_BACKENDS_CUDA_GRAPH_H_

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/graph_pool.h"
#include "backends/cuda/strided_tensor.h"

namespace kiln::cuda {

class CapturedGraph {
 public:
  // Records what `body` queues on `device`'s compute stream, without running it. Called on
  // the thread that runs `body`; no other thread may use the device until it returns (their
  // buffers are refused: every op of a device shares the stream). The capture's mode is
  // ThreadLocal: the runtime refuses unsafe calls from this thread only, so other threads keep
  // using their own devices. An op in `body` that would wait for the device or the host
  // throws (RefuseDuringCapture, context.h); the capture then ends and that error, or
  // `body`'s own, comes back.
  static absl::StatusOr<std::unique_ptr<CapturedGraph>> Capture(const CudaDevice& device,
                                                                const std::function<absl::Status()>& body);
  // The graph may still run (a launch in flight): the runtime frees it when done, and the
  // pool's blocks go back to the shared cache in stream order.
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Queues one replay on the device's compute stream (asynchronous, as any op).
  absl::Status Launch() const;

  const CudaDevice& device() const { return device_; }
  GraphPool::Stats pool_stats() const { return pool_->GetStats(); }

 private:
  CapturedGraph(const CudaDevice& device, std::shared_ptr<GraphPool> pool, cudaGraph_t graph, cudaGraphExec_t exec)
      : device_(device), pool_(std::move(pool)), graph_(graph), exec_(exec) {}

  CudaDevice device_;
  std::shared_ptr<GraphPool> pool_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
};

// Writes `src`'s elements into `dst`'s memory (same shape and dtype; `dst` row-major, e.g. a
// buffer a graph reads) on `dst`'s compute stream: one cudaMemcpyAsync when `src` is
// row-major too (a copy node inside a capture), the copy kernel otherwise. `src` on another
// device is moved first. Throws kiln::Error on a mismatch.
void WriteInto(const StridedTensor& src, const StridedTensor& dst);

// Queues a copy of `src` (row-major) into host memory `host` (pinned, so that the copy is
// asynchronous and capturable) on its device's compute stream.
void CopyToPinnedHost(const StridedTensor& src, void* host);

}  // namespace kiln::cuda

#endif  // KILN_BACKENDS_CUDA_GRAPH_H_
