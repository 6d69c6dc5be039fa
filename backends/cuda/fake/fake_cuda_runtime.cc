// The CUDA runtime half of the fake (see fake_runtime.h): the entry points the CUDA backend
// and nvcc's generated launch code call, found with `nm -u` on the backend's objects. Device
// and pinned memory are plain host allocations; copies and memsets really copy, so pointers
// and read-back flags behave; kernels are counted, not run. Stream capture and graphs are in
// fake_graphs.cc.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/cuda/fake/counters.h"
#include "backends/cuda/fake/fake_runtime.h"

struct CUevent_st {};

namespace kiln::cuda::fake {
namespace {

// Device names of the kernels nvcc registered, by their host stub's address (which is also
// the kernel handle the fake hands out).
struct KernelNames {
  std::mutex mu;
  std::unordered_map<const void*, std::string> by_stub;
};
KernelNames& Kernels() {
  static KernelNames* names = new KernelNames();  // registration runs in static constructors
  return *names;
}

// What <<<grid, block, shared, stream>>> pushed, popped by the kernel's host stub.
struct LaunchConfig {
  dim3 grid, block;
  size_t shared = 0;
  cudaStream_t stream = nullptr;
};
thread_local LaunchConfig pending_config;
thread_local const void* last_kernel = nullptr;
thread_local int current_device = 0;  // as the real runtime's, per thread

void* AllocateHost(size_t bytes) {
  constexpr size_t kAlign = 256;  // cudaMalloc's guarantee
  return std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
}

}  // namespace

Counters& GlobalCounters() {
  static Counters* counters = new Counters();
  return *counters;
}

Counts GetCounts() {
  const Counters& c = GlobalCounters();
  Counts out;
  out.launches = c.launches.load();
  out.blas_calls = c.blas_calls.load();
  out.syncs = c.syncs.load();
  out.mallocs = c.mallocs.load();
  out.copies = c.copies.load();
  out.device_switches = c.device_switches.load();
  out.runtime_calls = c.runtime_calls.load();
  out.graph_launches = c.graph_launches.load();
  out.replayed_kernels = c.replayed_kernels.load();
  out.replayed_copies = c.replayed_copies.load();
  return out;
}

Counts operator-(const Counts& after, const Counts& before) {
  Counts d;
  d.launches = after.launches - before.launches;
  d.blas_calls = after.blas_calls - before.blas_calls;
  d.syncs = after.syncs - before.syncs;
  d.mallocs = after.mallocs - before.mallocs;
  d.copies = after.copies - before.copies;
  d.device_switches = after.device_switches - before.device_switches;
  d.runtime_calls = after.runtime_calls - before.runtime_calls;
  d.graph_launches = after.graph_launches - before.graph_launches;
  d.replayed_kernels = after.replayed_kernels - before.replayed_kernels;
  d.replayed_copies = after.replayed_copies - before.replayed_copies;
  return d;
}

std::string LastKernel() {
  if (last_kernel == nullptr) return "";
  KernelNames& names = Kernels();
  std::lock_guard lock(names.mu);
  const auto it = names.by_stub.find(last_kernel);
  return it == names.by_stub.end() ? "(unregistered kernel)" : it->second;
}

}  // namespace kiln::cuda::fake

using kiln::cuda::fake::Bump;
using kiln::cuda::fake::GlobalCounters;

extern "C" {

// ---- What nvcc's generated code calls: registration at start-up, then each launch ---------
void** __cudaRegisterFatBinary(void* /*fat_cubin*/) {
  static void* handle = nullptr;
  return &handle;
}
void __cudaRegisterFatBinaryEnd(void** /*handle*/) {}
void __cudaUnregisterFatBinary(void** /*handle*/) {}
void __cudaRegisterFunction(void** /*handle*/, const char* host_stub, char* /*device_fun*/, const char* device_name,
                            int /*thread_limit*/, uint3* /*tid*/, uint3* /*bid*/, dim3* /*block*/, dim3* /*grid*/,
                            int* /*warp_size*/) {
  kiln::cuda::fake::KernelNames& names = kiln::cuda::fake::Kernels();
  std::lock_guard lock(names.mu);
  names.by_stub[host_stub] = device_name;
}
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* host_stub) {
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(host_stub));
  return cudaSuccess;
}
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, cudaStream_t stream) {
  kiln::cuda::fake::pending_config = {grid, block, shared, stream};
  return 0;
}
cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared, void* stream) {
  const kiln::cuda::fake::LaunchConfig& c = kiln::cuda::fake::pending_config;
  *grid = c.grid;
  *block = c.block;
  *shared = c.shared;
  *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 /*grid*/, dim3 /*block*/, void** /*args*/, size_t /*shared*/,
                               cudaStream_t stream) {
  if (kiln::cuda::fake::Recording* r = kiln::cuda::fake::CaptureOf(stream)) {
    ++r->kernels;
  } else {
    Bump(GlobalCounters().launches);
  }
  kiln::cuda::fake::last_kernel = kernel;
  return cudaSuccess;
}

// ---- Devices and errors ---------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count) {
  Bump(GlobalCounters().runtime_calls);
  *count = kiln::cuda::fake::kDevices;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  Bump(GlobalCounters().device_switches);
  if (device < 0 || device >= kiln::cuda::fake::kDevices) return cudaErrorInvalidDevice;
  kiln::cuda::fake::current_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  Bump(GlobalCounters().runtime_calls);
  *device = kiln::cuda::fake::current_device;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int /*device*/) {
  Bump(GlobalCounters().runtime_calls);
  *value = attr == cudaDevAttrMultiProcessorCount ? 132 : 0;  // an H200's multiprocessors
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorName(cudaError_t error) {
  return error == cudaSuccess ? "cudaSuccess" : "cudaErrorFromTheFakeRuntime";
}
const char* cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "an error of the fake CUDA runtime";
}

// ---- Memory -------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  Bump(GlobalCounters().mallocs);
  if (kiln::cuda::fake::UnsafeDuringCapture()) return cudaErrorStreamCaptureUnsupported;
  *ptr = bytes == 0 ? nullptr : kiln::cuda::fake::AllocateHost(bytes);  // as cudaMalloc(0)
  return *ptr != nullptr || bytes == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* ptr) {
  Bump(GlobalCounters().runtime_calls);
  std::free(ptr);
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int /*flags*/) {
  Bump(GlobalCounters().mallocs);
  *ptr = bytes == 0 ? nullptr : kiln::cuda::fake::AllocateHost(bytes);
  return *ptr != nullptr || bytes == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void* ptr) {
  Bump(GlobalCounters().runtime_calls);
  std::free(ptr);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind /*kind*/, cudaStream_t stream) {
  if (kiln::cuda::fake::Recording* r = kiln::cuda::fake::CaptureOf(stream)) {
    r->copies.push_back([=] {
      if (bytes > 0) std::memcpy(dst, src, bytes);
    });
    return cudaSuccess;
  }
  Bump(GlobalCounters().copies);
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyPeerAsync(void* dst, int /*dst_device*/, const void* src, int /*src_device*/, size_t bytes,
                                cudaStream_t stream) {
  if (kiln::cuda::fake::Recording* r = kiln::cuda::fake::CaptureOf(stream)) {
    r->copies.push_back([=] {
      if (bytes > 0) std::memcpy(dst, src, bytes);
    });
    return cudaSuccess;
  }
  Bump(GlobalCounters().copies);
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (kiln::cuda::fake::Recording* r = kiln::cuda::fake::CaptureOf(stream)) {
    r->copies.push_back([=] {
      if (bytes > 0) std::memset(ptr, value, bytes);
    });
    return cudaSuccess;
  }
  Bump(GlobalCounters().copies);
  if (bytes > 0) std::memset(ptr, value, bytes);
  return cudaSuccess;
}

// ---- Streams and events: everything has always finished -------------------------------------
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int /*flags*/) {
  Bump(GlobalCounters().runtime_calls);
  *stream = new CUstream_st;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Bump(GlobalCounters().syncs);
  // As the real runtime: waiting for a stream that records rather than runs is an error,
  // and it ruins the capture.
  if (stream != nullptr && stream->capture != nullptr) {
    stream->invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  Bump(GlobalCounters().syncs);
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t /*stream*/, cudaEvent_t /*event*/, unsigned int /*flags*/) {
  Bump(GlobalCounters().runtime_calls);
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int /*flags*/) {
  Bump(GlobalCounters().runtime_calls);
  *event = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t /*event*/, cudaStream_t /*stream*/) {
  Bump(GlobalCounters().runtime_calls);
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t /*event*/) {
  Bump(GlobalCounters().runtime_calls);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  Bump(GlobalCounters().runtime_calls);
  delete event;
  return cudaSuccess;
}

}  // extern "C"
