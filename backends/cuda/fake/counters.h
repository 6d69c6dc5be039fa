// The fake runtime's counters, shared by its CUDA runtime and cuBLAS halves (internal).
#ifndef KILN_BACKENDS_CUDA_FAKE_COUNTERS_H_
#define KILN_BACKENDS_CUDA_FAKE_COUNTERS_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace kiln::cuda::fake {

struct Counters {
  std::atomic<int64_t> launches{0};
  std::atomic<int64_t> blas_calls{0};
  std::atomic<int64_t> syncs{0};
  std::atomic<int64_t> mallocs{0};
  std::atomic<int64_t> copies{0};
  std::atomic<int64_t> device_switches{0};
  std::atomic<int64_t> runtime_calls{0};
  std::atomic<int64_t> graph_launches{0};
  std::atomic<int64_t> replayed_kernels{0};
  std::atomic<int64_t> replayed_copies{0};
};

// Relaxed increments: the counts are read after the ops, on the thread that made them or
// after joining the threads that did.
inline void Bump(std::atomic<int64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

Counters& GlobalCounters();

// What a stream capture recorded: kernels and GEMMs are counted (the fake never runs them),
// copies and memsets are kept to be run, for real, by each launch of the graph.
struct Recording {
  int64_t kernels = 0;
  std::vector<std::function<void()>> copies;
};

// The recording `stream` is being captured into; null when it is not capturing (then the
// work runs, or is counted, at once).
Recording* CaptureOf(cudaStream_t stream);

// For calls a capture forbids on its thread (cudaMalloc): true, and the capture ruined, when
// this thread captures in a mode other than Relaxed and has not relaxed its own mode
// (cudaThreadExchangeStreamCaptureMode), as in the real runtime.
bool UnsafeDuringCapture();

}  // namespace kiln::cuda::fake

// A fake stream: only its capture state (work on it has always finished).
struct CUstream_st {
  kiln::cuda::fake::Recording* capture = nullptr;  // owned while capturing
  bool invalidated = false;                        // a call the capture cannot hold was made
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id capturer;
};

#endif  // KILN_BACKENDS_CUDA_FAKE_COUNTERS_H_
