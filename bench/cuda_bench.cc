// CUDA benchmarks, each against the bound it should reach, timed with CUDA events on the
// device's compute stream in the same run:
//   matmul through kiln vs cuBLAS called directly (same sizes, same f32 settings);
//   element-wise add vs a device-to-device cudaMemcpy moving the same bytes (bandwidth);
//   the same two in f32, bf16 and f16 side by side (BM_TypedMatmul: kiln vs a direct
//   cublasGemmEx in that type accumulating in f32, the no-framework limit; BM_TypedAdd);
//   sums (whole tensor, over rows, over columns) vs cuBLAS reading the same bytes (asum,
//   gemv with a vector of ones);
//   a tiny add (64 floats), host time per op, vs one cudaMemsetAsync (a bare launch): what
//   kiln adds to every op when kernels are too small to hide it (small training batches);
//   NCCL all-reduce over every GPU: bus bandwidth as nccl-tests defines it,
//   busbw = algbw * 2(n-1)/n, where algbw = bytes / time;
//   a one-GPU DataParallel training step, eager vs replayed from a CUDA graph
//   (captured_step_bench.h), in samples/s, wall time per step (each waits for its loss).
// Without a GPU it prints why and exits 0 (so scripts can run it anywhere).
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <vector>

#include "backends/cuda/context.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_error.h"
#include "bench/captured_step_bench.h"
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
    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, static_cast<const float*>(b.primitive().data()), n,
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
    cudaMemcpyAsync(dst.primitive().mutable_data(), src.primitive().data(), copy_bytes, cudaMemcpyDeviceToDevice, s);
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

// Matmul and add per dtype (range 1: 0 f32, 1 bf16, 2 f16): what the halves gain over f32 and
// whether kiln's half paths keep up with cuBLAS's and cudaMemcpy's.
DType BenchDType(int64_t i) { return i == 0 ? DType::kF32 : i == 1 ? DType::kBF16 : DType::kF16; }
cudaDataType_t CublasType(DType d) {
  return d == DType::kF32 ? CUDA_R_32F : d == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
}

void BM_TypedMatmul(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const DType dtype = BenchDType(state.range(1));
  state.SetLabel(DTypeName(dtype));
  Generator gen(1);
  const T a = T::uniform({n, n}, -1, 1, gen).to(dtype), b = T::uniform({n, n}, -1, 1, gen).to(dtype);
  T c = a.matmul(b);
  cublasHandle_t handle;
  cuda::ThrowIfCublas(cublasCreate(&handle), "cublasCreate");
  cuda::ThrowIfCublas(cublasSetStream(handle, cuda::Context(CudaDevice(0)).stream), "cublasSetStream");
  const T ref = T::zeros({n, n}, dtype);
  const float one = 1, zero = 0;
  const cudaDataType_t type = CublasType(dtype);
  auto direct = [&](cudaStream_t) {
    cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b.primitive().data(), type, n, a.primitive().data(),
                 type, n, &zero, ref.primitive().mutable_data(), type, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
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
  state.counters["gemmex_TFLOPS"] = flops / (ref_ms / 1e3) / 1e12;
  state.counters["ratio"] = ref_ms / kiln_ms;
}
BENCHMARK(BM_TypedMatmul)->ArgsProduct({{4096}, {0, 1, 2}})->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_TypedAdd(benchmark::State& state) {
  const int64_t n = state.range(0);
  const DType dtype = BenchDType(state.range(1));
  state.SetLabel(DTypeName(dtype));
  const int64_t size = DTypeSize(dtype);
  const T a = T::ones({n}, dtype), b = T::ones({n}, dtype);
  T c = a + b;
  const T src = T::zeros({n * 3 / 2}, dtype), dst = T::zeros({n * 3 / 2}, dtype);
  const size_t copy_bytes = static_cast<size_t>(n * 3 / 2 * size);
  auto copy = [&](cudaStream_t s) {
    cudaMemcpyAsync(dst.primitive().mutable_data(), src.primitive().data(), copy_bytes, cudaMemcpyDeviceToDevice, s);
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
  const double bytes = 3.0 * n * size * state.iterations();
  state.counters["kiln_GBps"] = bytes / (kiln_ms / 1e3) / 1e9;
  state.counters["memcpy_GBps"] = bytes / (ref_ms / 1e3) / 1e9;
  state.counters["ratio"] = ref_ms / kiln_ms;
  state.counters["elems_per_us"] = static_cast<double>(n) * state.iterations() / (kiln_ms * 1e3);
}
BENCHMARK(BM_TypedAdd)->ArgsProduct({{1 << 24}, {0, 1, 2}})->UseManualTime()->Unit(benchmark::kMicrosecond);

// Host time per tiny add, 1000 in a row then one wait, against as many cudaMemsetAsync calls
// of the same bytes: the launch-bound regime of small batches, where the host is the limit.
// Each loop is timed twice: to the last call's return (`*_issue_us`, the host's own cost per
// op) and to the end of the wait (`*_us`), which also holds the device's time for the 1000
// kernels; if the second is well above the first, the device, not the host, set the pace.
void BM_TinyAdd(benchmark::State& state) {
  constexpr int kOps = 1000;
  const T a = T::ones({64}), b = T::ones({64});
  T c = a + b;
  cuda::DeviceContext& ctx = cuda::Context(CudaDevice(0));
  struct Times {
    double issue_ms, total_ms;
  };
  auto host_ms = [&](auto&& op) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    for (int i = 0; i < kOps; ++i) op();
    const auto issued = Clock::now();
    cuda::Synchronize(CudaDevice(0));
    const auto done = Clock::now();
    return Times{std::chrono::duration<double, std::milli>(issued - start).count(),
                 std::chrono::duration<double, std::milli>(done - start).count()};
  };
  auto memset = [&] { cudaMemsetAsync(c.primitive().mutable_data(), 0, 64 * sizeof(float), ctx.stream); };
  host_ms(memset);
  double kiln_ms = 0, ref_ms = 0, kiln_issue_ms = 0, ref_issue_ms = 0;
  for (auto _ : state) {
    const Times k = host_ms([&] { c = a + b; });
    const Times r = host_ms(memset);
    kiln_ms += k.total_ms;
    ref_ms += r.total_ms;
    kiln_issue_ms += k.issue_ms;
    ref_issue_ms += r.issue_ms;
    state.SetIterationTime(k.total_ms / 1e3);  // an iteration is kOps adds
  }
  const double per_op_us = 1e3 / kOps / state.iterations();
  state.counters["kiln_us"] = kiln_ms * per_op_us;
  state.counters["launch_us"] = ref_ms * per_op_us;
  state.counters["kiln_issue_us"] = kiln_issue_ms * per_op_us;
  state.counters["launch_issue_us"] = ref_issue_ms * per_op_us;
  state.counters["ratio"] = ref_ms / kiln_ms;
}
BENCHMARK(BM_TinyAdd)->UseManualTime()->Unit(benchmark::kMicrosecond);

// Sums of N positive floats, each against the cuBLAS call that reads the same bytes once:
// the whole tensor (asum), each row of [N/4096, 4096] and each column of [4096, N/4096]
// (gemv with a vector of ones). Both write their result on the device.
enum class SumOver { kAll, kRows, kColumns };

void Sum(benchmark::State& state, SumOver over) {
  const int64_t n = state.range(0), wide = 4096, other = n / wide;
  const Shape shape = over == SumOver::kColumns ? Shape{wide, other} : Shape{other, wide};
  const T a = T::ones(shape);
  const auto kiln_sum = [&] {
    switch (over) {
      case SumOver::kAll: return a.sum();
      case SumOver::kRows: return a.sum({1});
      case SumOver::kColumns: return a.sum({0});
    }
    return a.sum();
  };
  T c = kiln_sum();
  cublasHandle_t handle;
  cuda::ThrowIfCublas(cublasCreate(&handle), "cublasCreate");
  cuda::ThrowIfCublas(cublasSetStream(handle, cuda::Context(CudaDevice(0)).stream), "cublasSetStream");
  cuda::ThrowIfCublas(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");
  const T ones = T::ones({wide > other ? wide : other}), out = T::zeros({wide > other ? wide : other});
  const T scalars = T::from_data(TensorData::FromVector(std::vector<float>{1, 0}, Shape{2}), CudaDevice(0));
  const float* x = static_cast<const float*>(a.primitive().data());
  const float* one = static_cast<const float*>(scalars.primitive().data());
  const float* zero = one + 1;
  float* y = static_cast<float*>(out.primitive().mutable_data());
  const float* v = static_cast<const float*>(ones.primitive().data());
  // Row-major [rows, cols] is column-major [cols, rows]: row sums are its transpose times ones.
  auto reference = [&](cudaStream_t) {
    const int w = static_cast<int>(wide), o = static_cast<int>(other);
    switch (over) {
      case SumOver::kAll: cublasSasum(handle, static_cast<int>(n), x, 1, y); break;
      case SumOver::kRows: cublasSgemv(handle, CUBLAS_OP_T, w, o, one, x, w, v, 1, zero, y, 1); break;
      case SumOver::kColumns: cublasSgemv(handle, CUBLAS_OP_N, o, w, one, x, o, v, 1, zero, y, 1); break;
    }
  };
  TimeOnStream(reference);
  double kiln_ms = 0, ref_ms = 0;
  for (auto _ : state) {
    const double k = TimeOnStream([&](cudaStream_t) { c = kiln_sum(); });
    const double r = TimeOnStream(reference);
    kiln_ms += k;
    ref_ms += r;
    state.SetIterationTime(k / 1e3);
  }
  cublasDestroy(handle);
  const double bytes = static_cast<double>(n) * sizeof(float) * state.iterations();
  state.counters["kiln_GBps"] = bytes / (kiln_ms / 1e3) / 1e9;
  state.counters["cublas_GBps"] = bytes / (ref_ms / 1e3) / 1e9;
  state.counters["ratio"] = ref_ms / kiln_ms;
}
void BM_SumAll(benchmark::State& state) { Sum(state, SumOver::kAll); }
void BM_SumRows(benchmark::State& state) { Sum(state, SumOver::kRows); }
void BM_SumColumns(benchmark::State& state) { Sum(state, SumOver::kColumns); }
BENCHMARK(BM_SumAll)->Arg(1 << 20)->Arg(1 << 24)->Arg(1 << 28)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SumRows)->Arg(1 << 20)->Arg(1 << 24)->Arg(1 << 28)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SumColumns)->Arg(1 << 20)->Arg(1 << 24)->Arg(1 << 28)->UseManualTime()->Unit(benchmark::kMicrosecond);

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
  auto sync_all = [&] {
    for (const CudaDevice& d : devices) cuda::Synchronize(d);
  };
  auto run = [&] {
    auto out = group.AllReduce(absl::MakeConstSpan(inputs), ReduceOp::kSum);
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

namespace kiln {
namespace {

// {model (0: tiny MLP 10-100-100-1, batch 64; 1: MLP 784-256-256-10, batch 256), captured}.
void BM_DataParallelStep(benchmark::State& state) {
  bench::CapturedStepBenchmark(state, [](bool) {});
}
BENCHMARK(BM_DataParallelStep)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"mlp", "captured"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln
