// Stream capture and CUDA graphs in the fake runtime (see fake_runtime.h). A capture keeps a
// Recording on the stream: launches and GEMMs queued there are counted into it, copies and
// memsets are kept as closures. Instantiating copies the recording; each launch adds its
// counts to the replayed ones and runs its copies, so data a graph moves really moves while
// kernels stay counted only. The rules kiln relies on are the real runtime's: one capture per
// stream at a time, ended on the thread that began it (unless Relaxed), and a wait for a
// capturing stream ruins the capture (cudaStreamSynchronize in fake_cuda_runtime.cc).
#include <cuda_runtime_api.h>

#include <memory>
#include <thread>
#include <utility>

#include "backends/cuda/fake/counters.h"

struct CUgraph_st {
  kiln::cuda::fake::Recording recording;
};
struct CUgraphExec_st {
  kiln::cuda::fake::Recording recording;
};

namespace kiln::cuda::fake {

Recording* CaptureOf(cudaStream_t stream) { return stream == nullptr ? nullptr : stream->capture; }

namespace {
thread_local cudaStream_t capturing_here = nullptr;  // a capture this thread began, not Relaxed
thread_local cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;
}  // namespace

bool UnsafeDuringCapture() {
  if (capturing_here == nullptr || thread_mode == cudaStreamCaptureModeRelaxed) return false;
  capturing_here->invalidated = true;
  return true;
}

}  // namespace kiln::cuda::fake

using kiln::cuda::fake::Bump;
using kiln::cuda::fake::GlobalCounters;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  Bump(GlobalCounters().runtime_calls);
  if (stream == nullptr) return cudaErrorStreamCaptureUnsupported;  // the legacy stream
  if (stream->capture != nullptr) return cudaErrorIllegalState;
  stream->capture = new kiln::cuda::fake::Recording();
  stream->invalidated = false;
  stream->mode = mode;
  stream->capturer = std::this_thread::get_id();
  if (mode != cudaStreamCaptureModeRelaxed) kiln::cuda::fake::capturing_here = stream;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  Bump(GlobalCounters().runtime_calls);
  if (stream == nullptr || stream->capture == nullptr) return cudaErrorIllegalState;
  if (stream->mode != cudaStreamCaptureModeRelaxed && stream->capturer != std::this_thread::get_id()) {
    return cudaErrorStreamCaptureWrongThread;
  }
  std::unique_ptr<kiln::cuda::fake::Recording> recording(stream->capture);
  stream->capture = nullptr;
  if (kiln::cuda::fake::capturing_here == stream) kiln::cuda::fake::capturing_here = nullptr;
  *graph = nullptr;
  if (stream->invalidated) return cudaErrorStreamCaptureInvalidated;
  *graph = new CUgraph_st{std::move(*recording)};
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  Bump(GlobalCounters().runtime_calls);
  std::swap(*mode, kiln::cuda::fake::thread_mode);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  Bump(GlobalCounters().runtime_calls);
  if (stream == nullptr || stream->capture == nullptr) {
    *status = cudaStreamCaptureStatusNone;
  } else {
    *status = stream->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  }
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long /*flags*/) {
  Bump(GlobalCounters().runtime_calls);
  if (graph == nullptr) return cudaErrorInvalidValue;
  *exec = new CUgraphExec_st{graph->recording};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t /*stream*/) {
  if (exec == nullptr) return cudaErrorInvalidValue;
  kiln::cuda::fake::Counters& c = GlobalCounters();
  Bump(c.graph_launches);
  c.replayed_kernels.fetch_add(exec->recording.kernels, std::memory_order_relaxed);
  c.replayed_copies.fetch_add(static_cast<int64_t>(exec->recording.copies.size()), std::memory_order_relaxed);
  for (const auto& copy : exec->recording.copies) copy();
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  Bump(GlobalCounters().runtime_calls);
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  Bump(GlobalCounters().runtime_calls);
  delete graph;
  return cudaSuccess;
}

}  // extern "C"
