// CUDA benchmarks, each against the bound it should reach, timed with CUDA events on the
// device's compute stream in the same run:
//   matmul through kiln vs cuBLAS called directly (same sizes, same f32 settings);
//   element-wise add vs a device-to-device cudaMemcpy moving the same bytes (bandwidth);
//   NCCL all-reduce over every GPU: bus bandwidth as nccl-tests defines it,
//   busbw = algbw * 2(n-1)/n, where algbw = bytes / time.
// Without a GPU it prints why and exits 0 (so scripts can run it anywhere).
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_error.h"
#include "distributed/device_group.h"

namespace kiln {
namespace {

using T = Tensor<Cuda>;

// Milliseconds of work queued by `f` on cuda:0's compute stream.
template <class F>
double TimeOnStream(F&& f) {
  cuda::DeviceContext& c = cuda::Context(CudaDevice(0));
  cudaEvent_t start, stop;
  cuda::ThrowIfCuda(cudaEventCreate(&start), "cudaEventCreate");
  cuda::ThrowIfCuda(cudaEventCreate(&stop), "cudaEventCreate");
  cuda::ThrowIfCuda(cudaEventRecord(start, c.stream), "cudaEventRecord");
  f(c.stream);
  cuda::ThrowIfCuda(cudaEventRecord(stop, c.stream), "cudaEventRecord");
  cuda::ThrowIfCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

// Interleaves kiln and the reference in every iteration; reports kiln's time as the manual
// time, both rates and their ratio (kiln / reference, 1.0 = as fast).
void BM_Matmul(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Generator gen(1);
  const T a = T::uniform({n, n}, -1, 1, gen), b = T::uniform({n, n}, -1, 1, gen);
  T c = a.matmul(b);  // warm-up: allocator cache, cuBLAS heuristics
  cublasHandle_t handle;
  cuda::ThrowIfCublas(cublasCreate(&handle), "cublasCreate");
  cuda::ThrowIfCublas(cublasSetStream(handle, cuda::Context(CudaDevice(0)).stream), "cublasSetStream");
  const T ref = T::zeros({n, n});
  const float one = 1, zero = 0;
  auto direct = [&](cudaStream_t) {
    // Row-major C = A B as column-major C^T = B^T A^T.
    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one,
                static_cast<const float*>(b.primitive().data()), n,
                static_cast<const float*>(a.primitive().data()), n, &zero,
                static_cast<float*>(ref.primitive().mutable_data()), n);
  };
  TimeOnStream(direct);
  double kiln_ms = 0, ref_ms = 0;
  for (auto _ : state) {
    const double k = TimeOnStream([&](cudaStream_t) { c = a.matmul(b); });
    const double r = TimeOnStream(direct);
    kiln_ms += k;
    ref_ms += r;
    state.SetIterationTime(k / 1e3);
  }
  cublasDestroy(handle);
  const double flops = 2.0 * n * n * n * state.iterations();
  state.counters["kiln_TFLOPS"] = flops / (kiln_ms / 1e3) / 1e12;
  state.counters["cublas_TFLOPS"] = flops / (ref_ms / 1e3) / 1e12;
  state.counters["ratio"] = ref_ms / kiln_ms;
}
BENCHMARK(BM_Matmul)->Arg(1024)->Arg(2048)->Arg(4096)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);

// a + b reads 2 and writes 1 buffer of N floats; the reference copies 1.5 N floats, which
// also reads and writes 3 N floats' worth of bytes.
void BM_Add(benchmark::State& state) {
  const int64_t n = state.range(0);
  const T a = T::ones({n}), b = T::ones({n});
  T c = a + b;
  const T src = T::zeros({n * 3 / 2}), dst = T::zeros({n * 3 / 2});
  const size_t copy_bytes = static_cast<size_t>(n * 3 / 2) * sizeof(float);
  auto copy = [&](cudaStream_t s) {
    cudaMemcpyAsync(dst.primitive().mutable_data(), src.primitive().data(), copy_bytes,
                    cudaMemcpyDeviceToDevice, s);
  };
  TimeOnStream(copy);
  double kiln_ms = 0, ref_ms = 0;
  for (auto _ : state) {
    const double k = TimeOnStream([&](cudaStream_t) { c = a + b; });
    const double r = TimeOnStream(copy);
    kiln_ms += k;
    ref_ms += r;
    state.SetIterationTime(k / 1e3);
  }
  const double bytes = 3.0 * n * sizeof(float) * state.iterations();
  state.counters["kiln_GBps"] = bytes / (kiln_ms / 1e3) / 1e9;
  state.counters["memcpy_GBps"] = bytes / (ref_ms / 1e3) / 1e9;
  state.counters["ratio"] = ref_ms / kiln_ms;
}
BENCHMARK(BM_Add)->Arg(1 << 20)->Arg(1 << 24)->Arg(1 << 28)->UseManualTime()->Unit(benchmark::kMicrosecond);

// All-reduce (sum) of `bytes` of f32 on every GPU, as one grouped list call.
void BM_NcclAllReduce(benchmark::State& state) {
  const int gpus = cuda::DeviceCount();
  const int64_t n = state.range(0) / static_cast<int64_t>(sizeof(float));
  std::vector<CudaDevice> devices;
  std::vector<T> inputs;
  for (int i = 0; i < gpus; ++i) {
    devices.push_back(CudaDevice(i));
    inputs.push_back(T::ones({n}, DType::kF32, CudaDevice(i)));
  }
  distributed::DeviceGroup<Cuda> group(devices);
  auto sync_all = [&] { for (const CudaDevice& d : devices) cuda::Synchronize(d); };
  auto run = [&] {
    auto out = group.AllReduce(absl::MakeConstSpan(inputs), distributed::ReduceKind::kSum);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return false;
    }
    for (const T& t : *out) (void)(t * 1);  // a use: the compute streams wait on the result
    return true;
  };
  if (!run()) return;  // communicators are made outside the timed loop
  sync_all();
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    if (!run()) break;
    sync_all();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    seconds += s;
    state.SetIterationTime(s);
  }
  const double algbw = static_cast<double>(n) * sizeof(float) * state.iterations() / seconds / 1e9;
  state.counters["gpus"] = gpus;
  state.counters["algbw_GBps"] = algbw;
  state.counters["busbw_GBps"] = algbw * 2.0 * (gpus - 1) / gpus;
}
BENCHMARK(BM_NcclAllReduce)->Arg(1 << 20)->Arg(1 << 24)->Arg(1 << 28)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  if (const absl::Status s = kiln::cuda::Available(); !s.ok()) {
    std::printf("cuda_bench: skipped: no CUDA device: %s\n", std::string(s.message()).c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
