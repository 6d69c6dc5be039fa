#include "backends/cuda/graph.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/cuda/context.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_error.h"
#include "backends/cuda/launch.h"
#include "tensor/error.h"

namespace kiln::cuda {
namespace {

// Puts `c` in capture mode for the calling thread, and out of it again when it goes.
class CaptureMode {
 public:
  CaptureMode(DeviceContext& c, std::shared_ptr<GraphPool> pool) : c_(c) {
    std::lock_guard lock(c_.capture_mu);
    c_.capture_pool = std::move(pool);
    c_.capture_thread = std::this_thread::get_id();
    c_.capturing.store(true, std::memory_order_release);
  }
  ~CaptureMode() {
    std::lock_guard lock(c_.capture_mu);
    c_.capturing.store(false, std::memory_order_release);
    c_.capture_pool = nullptr;
  }
  CaptureMode(const CaptureMode&) = delete;
  CaptureMode& operator=(const CaptureMode&) = delete;

 private:
  DeviceContext& c_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CapturedGraph>> CapturedGraph::Capture(const CudaDevice& device,
                                                                      const std::function<absl::Status()>& body) {
  const std::string where = device.ToString();
  DeviceContext* c = nullptr;
  try {
    c = &Context(device);
  } catch (const Error& e) {
    return e.status();
  }
  if (c->capturing.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(absl::StrCat(where, " is already being captured into a CUDA graph"));
  }
  auto pool = std::make_shared<GraphPool>(*c->memory);
  absl::Status body_status;
  cudaGraph_t graph = nullptr;
  cudaError_t ended = cudaSuccess;
  {
    CaptureMode mode(*c, pool);
    if (absl::Status s = CudaStatus(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal),
                                    absl::StrCat(where, ": cudaStreamBeginCapture"));
        !s.ok()) {
      cudaGetLastError();
      return s;
    }
    try {
      body_status = body();
    } catch (const Error& e) {
      body_status = e.status();
    }
    // Always ended, so that the stream records no more whatever went wrong.
    ended = cudaStreamEndCapture(c->stream, &graph);
    if (ended != cudaSuccess) cudaGetLastError();
  }
  if (!body_status.ok() || ended != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!body_status.ok()) return body_status;
    return CudaStatus(ended, absl::StrCat(where, ": cudaStreamEndCapture (a call in the captured work broke it)"));
  }
  cudaGraphExec_t exec = nullptr;
  if (absl::Status s = CudaStatus(cudaGraphInstantiate(&exec, graph, 0), absl::StrCat(where, ": cudaGraphInstantiate"));
      !s.ok()) {
    cudaGetLastError();
    cudaGraphDestroy(graph);
    return s;
  }
  return std::unique_ptr<CapturedGraph>(new CapturedGraph(device, std::move(pool), graph, exec));
}

CapturedGraph::~CapturedGraph() {
  cudaGraphExecDestroy(exec_);
  cudaGraphDestroy(graph_);
}

absl::Status CapturedGraph::Launch() const {
  try {
    DeviceContext& c = Context(device_);
    return CudaStatus(cudaGraphLaunch(exec_, c.stream), absl::StrCat(device_.ToString(), ": cudaGraphLaunch"));
  } catch (const Error& e) {
    return e.status();
  }
}

void WriteInto(const StridedTensor& src, const StridedTensor& dst) {
  if (src.shape != dst.shape || src.dtype != dst.dtype || !dst.IsContiguous()) {
    throw Error(absl::InvalidArgumentError(absl::StrCat("WriteInto: ", DTypeName(src.dtype), src.shape.ToString(),
                                                        " into ", DTypeName(dst.dtype), dst.shape.ToString(),
                                                        dst.IsContiguous() ? "" : " (not row-major)")));
  }
  const StridedTensor from = src.device == dst.device ? src : Cuda::to_device(src, dst.device);
  const int64_t bytes = from.shape.numel() * DTypeSize(from.dtype);
  if (bytes == 0 || from.data() == dst.data()) return;
  DeviceContext& c = Context(dst.device);
  if (!from.IsContiguous()) {
    CopyInto(from, dst.mutable_data(), dst.strides, dst.dtype);
    return;
  }
  Await(c, {&from});
  ThrowIfCuda(
      cudaMemcpyAsync(dst.mutable_data(), from.data(), static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, c.stream),
      absl::StrCat(dst.device.ToString(), ": cudaMemcpyAsync (WriteInto)"));
}

void CopyToPinnedHost(const StridedTensor& src, void* host) {
  if (!src.IsContiguous()) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat("CopyToPinnedHost: ", DTypeName(src.dtype), src.shape.ToString(), " is not row-major")));
  }
  const int64_t bytes = src.shape.numel() * DTypeSize(src.dtype);
  if (bytes == 0) return;
  DeviceContext& c = Context(src.device);
  Await(c, {&src});
  ThrowIfCuda(cudaMemcpyAsync(host, src.data(), static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, c.stream),
              absl::StrCat(src.device.ToString(), ": cudaMemcpyAsync (to pinned host memory)"));
}

}  // namespace kiln::cuda
