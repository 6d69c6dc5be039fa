// A fake CUDA runtime and cuBLAS for measuring the CUDA backend's host path on machines
// without a GPU (bench/cuda_host_bench.cc, tests/backends/cuda/fake_runtime_test.cc). Linked
// into a binary, its definitions take precedence over libcudart's and libcublas's, so kiln's
// CUDA code runs unchanged: device memory is host memory, kernels and GEMMs are counted and
// never run, streams and events are always ready. Never part of a real build.
#ifndef KILN_BACKENDS_CUDA_FAKE_FAKE_RUNTIME_H_
#define KILN_BACKENDS_CUDA_FAKE_FAKE_RUNTIME_H_

#include <cublas_api.h>
#include <library_types.h>

#include <cstdint>
#include <string>

namespace kiln::cuda::fake {

// How many GPUs the fake runtime reports (cuda:0 and cuda:1).
inline constexpr int kDevices = 2;

// Totals since the process started, over all threads.
struct Counts {
  int64_t launches = 0;         // kernel launches (<<<>>>)
  int64_t blas_calls = 0;       // cuBLAS GEMM calls
  int64_t syncs = 0;            // cudaStreamSynchronize / cudaDeviceSynchronize
  int64_t mallocs = 0;          // cudaMalloc and cudaHostAlloc
  int64_t copies = 0;           // cudaMemcpy*Async and cudaMemsetAsync
  int64_t device_switches = 0;  // cudaSetDevice
  int64_t runtime_calls = 0;    // every other runtime entry point (cudaSetDevice, events, ...)
  // CUDA graphs: work queued on a capturing stream is recorded, not counted above; each
  // cudaGraphLaunch counts once here and adds what its graph recorded to the replayed counts
  // (and runs the recorded copies, so data moved by a graph really moves).
  int64_t graph_launches = 0;
  int64_t replayed_kernels = 0;  // kernels and GEMMs
  int64_t replayed_copies = 0;   // copies and memsets
};
Counts GetCounts();
Counts operator-(const Counts& after, const Counts& before);

// The device-side (mangled) name of the most recent kernel launched on this thread; empty
// before the first.
std::string LastKernel();

// What the most recent cuBLAS GEMM (any thread) was asked to compute: its operand types and
// compute type say whether a matmul really runs in the precision it claims (the fake does
// not compute, so nothing else could tell). Zero-initialised before the first GEMM.
struct GemmCall {
  cudaDataType a_type{}, b_type{}, c_type{};
  cublasComputeType_t compute{};
  int m = 0, n = 0, k = 0, batches = 0;
};
GemmCall LastGemm();

}  // namespace kiln::cuda::fake

#endif  // KILN_BACKENDS_CUDA_FAKE_FAKE_RUNTIME_H_
