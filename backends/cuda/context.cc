#include "backends/cuda/context.h"

#include <atomic>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_error.h"
#include "tensor/error.h"

namespace kiln {

std::string CudaDevice::ToString() const { return absl::StrCat("cuda:", index_); }

namespace cuda {
namespace {

class Runtime {
 public:
  Runtime() {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      cudaGetLastError();
      unavailable_ = absl::FailedPreconditionError(
          absl::StrCat("no CUDA device is available (cudaGetDeviceCount: ", cudaGetErrorName(error), ": ",
                       cudaGetErrorString(error), ")"));
    } else if (count == 0) {
      unavailable_ = absl::FailedPreconditionError("no CUDA device is available (cudaGetDeviceCount found 0 devices)");
    }
    count_ = unavailable_.ok() ? count : 0;
    contexts_ = std::make_unique<std::atomic<DeviceContext*>[]>(count_);
  }

  int count() const { return count_; }
  const absl::Status& unavailable() const { return unavailable_; }

  // Every op asks, so a context that exists is found without a lock; the lock only keeps
  // two threads from making the same one.
  DeviceContext& Get(int index) {
    if (DeviceContext* c = contexts_[index].load(std::memory_order_acquire)) return *c;
    std::lock_guard lock(mu_);
    if (DeviceContext* c = contexts_[index].load(std::memory_order_relaxed)) return *c;
    DeviceContext* made = Make(index).release();  // never destroyed, see context.h
    contexts_[index].store(made, std::memory_order_release);
    return *made;
  }

 private:
  static std::unique_ptr<DeviceContext> Make(int index) {
    const std::string name = absl::StrCat("cuda:", index);
    ThrowIfCuda(cudaSetDevice(index), absl::StrCat(name, ": cudaSetDevice"));
    auto c = std::make_unique<DeviceContext>();
    c->index = index;
    ThrowIfCuda(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                absl::StrCat(name, ": cudaStreamCreateWithFlags"));
    ThrowIfCuda(cudaDeviceGetAttribute(&c->multiprocessors, cudaDevAttrMultiProcessorCount, index),
                absl::StrCat(name, ": cudaDeviceGetAttribute"));
    c->memory = new CachingAllocator(
        name + " device memory",
        [index, name, context = c.get()](size_t n) -> absl::StatusOr<void*> {
          void* p = nullptr;
          cudaSetDevice(index);
          // A miss while the stream is captured (graph_pool.h) must still reach cudaMalloc,
          // which a capture forbids its thread: the allocation is not part of the graph (the
          // pool holds the block for the graph's lifetime), so relaxing this one call is safe.
          const bool capturing = context->capturing.load(std::memory_order_acquire);
          cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
          if (capturing) cudaThreadExchangeStreamCaptureMode(&mode);
          const cudaError_t error = cudaMalloc(&p, n);
          if (capturing) cudaThreadExchangeStreamCaptureMode(&mode);
          if (absl::Status s = CudaStatus(error, absl::StrCat(name, ": cudaMalloc")); !s.ok()) {
            cudaGetLastError();
            return s;
          }
          return p;
        },
        [index](void* p) {
          // cudaFree waits for the device, so blocks are never freed under a running kernel.
          cudaSetDevice(index);
          cudaFree(p);
        });
    ThrowIfCublas(cublasCreate(&c->blas), absl::StrCat(name, ": cublasCreate"));
    ThrowIfCublas(cublasSetStream(c->blas, c->stream), absl::StrCat(name, ": cublasSetStream"));
    // Full f32 precision: no TF32 (results must match the CPU backend's within f32 rounding).
    ThrowIfCublas(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH), absl::StrCat(name, ": cublasSetMathMode"));
    return c;
  }

  int count_ = 0;
  absl::Status unavailable_;
  std::mutex mu_;
  std::unique_ptr<std::atomic<DeviceContext*>[]> contexts_;  // one slot per device
};

Runtime& GetRuntime() {
  static Runtime* runtime = new Runtime();  // never destroyed, see context.h
  return *runtime;
}

}  // namespace

int DeviceCount() { return GetRuntime().count(); }

absl::Status Available() { return GetRuntime().unavailable(); }

absl::Status CheckDevice(const CudaDevice& device) {
  Runtime& runtime = GetRuntime();
  if (!runtime.unavailable().ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(device.ToString(), " does not exist: ", runtime.unavailable().message()));
  }
  const int count = runtime.count();
  if (device.index() >= 0 && device.index() < count) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s does not exist: this machine has %d CUDA device%s (cuda:0..cuda:%d)", device.ToString(),
                      count, count == 1 ? "" : "s", count - 1));
}

DeviceContext& Lookup(const CudaDevice& device) {
  ThrowIfError(CheckDevice(device));
  return GetRuntime().Get(device.index());
}

DeviceContext& Context(const CudaDevice& device) {
  DeviceContext& c = Lookup(device);
  // cudaGetDevice reads a thread-local; cudaSetDevice costs more, and a thread's ops are
  // mostly on one device. Asking (rather than remembering the last device set here) stays
  // right when the caller or another library switched devices in between.
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == c.index) return c;
  cudaGetLastError();  // a failed cudaGetDevice must not surface as the next launch's error
  if (const cudaError_t error = cudaSetDevice(c.index); error != cudaSuccess) {
    ThrowIfCuda(error, absl::StrCat(device.ToString(), ": cudaSetDevice"));
  }
  return c;
}

CachingAllocator& PinnedMemory() {
  static CachingAllocator* pinned = new CachingAllocator(
      "pinned host memory",
      [](size_t n) -> absl::StatusOr<void*> {
        void* p = nullptr;
        if (absl::Status s = CudaStatus(cudaHostAlloc(&p, n, cudaHostAllocPortable), "cudaHostAlloc"); !s.ok()) {
          cudaGetLastError();
          return s;
        }
        return p;
      },
      [](void* p) { cudaFreeHost(p); });
  return *pinned;
}

absl::Status CaptureRefusal(const DeviceContext& context, const char* op) {
  if (!context.capturing.load(std::memory_order_acquire)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("cuda:", context.index, ": ", op,
                   " waits for the device or the host, which a CUDA graph capture cannot hold (a capture records "
                   "work without running it, and a replay would skip the wait): leave it out of the captured step"));
}

void ThrowCaptureRefusal(const DeviceContext& context, const char* op) {
  absl::Status s = CaptureRefusal(context, op);
  if (s.ok()) s = absl::InternalError(absl::StrCat("cuda:", context.index, ": ", op, ": the capture ended meanwhile"));
  throw Error(std::move(s));
}

void Synchronize(const CudaDevice& device) {
  DeviceContext& c = Context(device);
  RefuseDuringCapture(c, "Synchronize");
  ThrowIfCuda(cudaStreamSynchronize(c.stream), absl::StrCat(device.ToString(), ": cudaStreamSynchronize"));
}

}  // namespace cuda
}  // namespace kiln
