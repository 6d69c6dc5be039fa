// The CUDA backend's creation, transfer, copy and view operations.
#include "backends/cuda/cuda_backend.h"

#include <cstring>
#include <memory>

#include "absl/strings/str_format.h"
#include "backends/cuda/context.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/launch.h"
#include "tensor/strided_view.h"

namespace kiln {

using cuda::StridedTensor;

namespace cuda {

void Await(DeviceContext& context, std::initializer_list<const StridedTensor*> inputs) {
  for (const StridedTensor* t : inputs) {
    if (t->buffer == nullptr) continue;
    if (const DeviceBuffer::Event fence = t->buffer->fence()) {
      ThrowIfCuda(cudaStreamWaitEvent(context.stream, fence.get(), 0),
                  absl::StrCat("cuda:", context.index, ": cudaStreamWaitEvent (collective result)"));
    }
  }
}

void ReadBack(DeviceContext& context, const void* device_ptr, void* host, size_t bytes, const char* op) {
  RefuseDuringCapture(context, op);
  const std::string where = absl::StrCat("cuda:", context.index);
  // A copy to pageable memory returns only once the data is there.
  ThrowIfCuda(cudaMemcpyAsync(host, device_ptr, bytes, cudaMemcpyDeviceToHost, context.stream),
              absl::StrCat(where, ": cudaMemcpyAsync (read back)"));
  ThrowIfCuda(cudaStreamSynchronize(context.stream), absl::StrCat(where, ": cudaStreamSynchronize"));
}

void CopyInto(const StridedTensor& src, void* dst_base, const Dims& dst_strides, DType dst_dtype) {
  const int64_t n = src.shape.numel();
  if (n == 0) return;
  DeviceContext& c = Context(src.device);
  Await(c, {&src});
  const auto index = IndexFor<2>(src.shape, {dst_strides, src.strides}, "copy");
  CheckLaunch(kernels::Copy(src.dtype, dst_dtype, src.data(), dst_base, index, n, c.stream), "copy", src.device);
}

StridedTensor CopyAs(const StridedTensor& src, DType dtype) {
  StridedTensor dst = StridedTensor::Empty(src.shape, dtype, src.device);
  CopyInto(src, dst.mutable_data(), dst.strides, dtype);
  return dst;
}

namespace {

// A pinned staging block, returned to the pool once the copy that reads it has run.
void FreeAfter(CachingAllocator::Block block, DeviceContext& c) {
  cudaEvent_t event = nullptr;
  if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventRecord(event, c.stream) != cudaSuccess) {
    cudaGetLastError();
    if (event != nullptr) cudaEventDestroy(event);
    cudaStreamSynchronize(c.stream);  // no event: wait here instead
    PinnedMemory().Free(block);
    return;
  }
  auto done = std::shared_ptr<CUevent_st>(event, [](cudaEvent_t e) { cudaEventDestroy(e); });
  PinnedMemory().Free(block, [done] { return cudaEventQuery(done.get()) != cudaErrorNotReady; });
}

}  // namespace
}  // namespace cuda

Cuda::Primitive Cuda::from_data(const TensorData& data, const Device& device) {
  cuda::DeviceContext& c = cuda::Context(device);
  // The host bytes are staged in pinned memory freed after an event: a replay would copy
  // whatever that memory holds by then.
  cuda::RefuseDuringCapture(c, "from_data (a copy from the host)");
  StridedTensor t = StridedTensor::Empty(data.shape(), data.dtype(), device);
  const size_t bytes = static_cast<size_t>(data.nbytes());
  if (bytes == 0) return t;
  // Staged through pinned memory so the copy is a real DMA that overlaps host work.
  absl::StatusOr<cuda::CachingAllocator::Block> staging = cuda::PinnedMemory().Allocate(bytes);
  ThrowIfError(staging.status());
  std::memcpy(staging->ptr, data.raw(), bytes);
  const cudaError_t error = cudaMemcpyAsync(t.mutable_data(), staging->ptr, bytes, cudaMemcpyHostToDevice, c.stream);
  cuda::FreeAfter(*staging, c);
  cuda::ThrowIfCuda(error, absl::StrCat(device.ToString(), ": cudaMemcpyAsync (from host)"));
  return t;
}

TensorData Cuda::to_data(const Primitive& p) {
  cuda::RefuseDuringCapture(cuda::Context(p.device), "to_data (a copy to the host, as item() makes)");
  cuda::Await(cuda::Context(p.device), {&p});
  const StridedTensor src = contiguous(p);
  TensorData data(src.shape, src.dtype);
  const size_t bytes = static_cast<size_t>(data.nbytes());
  if (bytes == 0) return data;
  cuda::DeviceContext& c = cuda::Context(p.device);
  absl::StatusOr<cuda::CachingAllocator::Block> staging = cuda::PinnedMemory().Allocate(bytes);
  ThrowIfError(staging.status());
  cudaError_t error = cudaMemcpyAsync(staging->ptr, src.data(), bytes, cudaMemcpyDeviceToHost, c.stream);
  if (error == cudaSuccess) error = cudaStreamSynchronize(c.stream);
  if (error == cudaSuccess) std::memcpy(data.raw(), staging->ptr, bytes);
  cuda::PinnedMemory().Free(*staging);  // the stream has run the copy (or failed)
  cuda::ThrowIfCuda(error, absl::StrCat(p.device.ToString(), ": copy to host"));
  return data;
}

Cuda::Primitive Cuda::full(const Shape& shape, Scalar value, DType dtype, const Device& device) {
  cuda::DeviceContext& c = cuda::Context(device);
  StridedTensor t = StridedTensor::Empty(shape, dtype, device);
  double f = 0;
  int64_t i = 0;
  VisitDType(dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T> || kIsHalf<T>)
      f = static_cast<double>(value.as<T>());
    else
      i = static_cast<int64_t>(value.as<T>());
  });
  cuda::CheckLaunch(cuda::kernels::Fill(dtype, t.mutable_data(), shape.numel(), f, i, c.stream), "fill", device);
  return t;
}

Cuda::Primitive Cuda::to_device(const Primitive& p, const Device& device) {
  if (p.device == device) return p;
  cuda::DeviceContext& from = cuda::Context(p.device);
  cuda::RefuseDuringCapture(from, "to_device (a copy between GPUs, which waits for it)");
  cuda::RefuseDuringCapture(cuda::Lookup(device), "to_device (a copy between GPUs, which waits for it)");
  cuda::Await(from, {&p});
  const StridedTensor src = contiguous(p);
  cudaEvent_t ready = nullptr;
  cuda::ThrowIfCuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "to_device: cudaEventCreateWithFlags");
  const cudaError_t recorded = cudaEventRecord(ready, from.stream);
  cuda::DeviceContext& to = cuda::Context(device);
  StridedTensor t = StridedTensor::Empty(p.shape, p.dtype, device);
  cudaError_t error = recorded;
  if (error == cudaSuccess) error = cudaStreamWaitEvent(to.stream, ready, 0);
  const size_t bytes = static_cast<size_t>(p.shape.numel() * DTypeSize(p.dtype));
  if (error == cudaSuccess && bytes > 0) {
    error = cudaMemcpyPeerAsync(t.mutable_data(), device.index(), src.data(), p.device.index(), bytes, to.stream);
  }
  // The source buffer belongs to the other device's stream: wait for the copy so that stream
  // may reuse it as soon as `src` goes. Moving between GPUs is rare enough to afford it.
  if (error == cudaSuccess) error = cudaStreamSynchronize(to.stream);
  cudaEventDestroy(ready);
  cuda::ThrowIfCuda(error, absl::StrCat("to_device ", p.device.ToString(), " -> ", device.ToString()));
  return t;
}

Cuda::Primitive Cuda::cast(const Primitive& p, DType dtype) { return cuda::CopyAs(p, dtype); }

Cuda::Primitive Cuda::contiguous(const Primitive& p) { return p.IsContiguous() ? p : cuda::CopyAs(p, p.dtype); }

Cuda::Primitive Cuda::reshape(const Primitive& p, const Shape& shape) {
  return strided::Reshaped(contiguous(p), shape);
}

Cuda::Primitive Cuda::permute(const Primitive& p, absl::Span<const int64_t> dims) { return strided::Permute(p, dims); }

Cuda::Primitive Cuda::expand(const Primitive& p, const Shape& shape) { return strided::Expand(p, shape); }

Cuda::Primitive Cuda::slice(const Primitive& p, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return strided::Slice(p, dim, start, end, step);
}

MemoryUsage Cuda::memory_usage(const Device& d) { return cuda::Lookup(d).tensor_memory.usage(); }

void Cuda::reset_peak_memory(const Device& d) { cuda::Lookup(d).tensor_memory.ResetPeak(); }

absl::StatusOr<std::vector<CudaDevice>> Cuda::EnsureDevices(int n) {
  const int count = cuda::DeviceCount();
  if (count < n) {
    return absl::ResourceExhaustedError(absl::StrFormat("needs %d CUDA devices; this machine has %d", n, count));
  }
  std::vector<CudaDevice> out;
  for (int i = 0; i < n; ++i) out.push_back(CudaDevice(i));
  return out;
}

}  // namespace kiln
