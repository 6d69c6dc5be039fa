// The CPU backend's creation, transfer and view operations.
#include "backends/cpu/cpu_backend.h"

#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"
#include "tensor/strided_view.h"

namespace kiln {

using cpu::StridedTensor;

namespace cpu {

void RequireDevice(const CpuDevice& device) { ThrowIfError(CheckDevice(device)); }

}  // namespace cpu

Cpu::Primitive Cpu::from_data(const TensorData& data, const Device& device) {
  cpu::RequireDevice(device);
  StridedTensor t = StridedTensor::Empty(data.shape(), data.dtype(), device);
  if (data.nbytes() > 0) std::memcpy(t.mutable_data<std::byte>(), data.raw(), data.nbytes());
  return t;
}

TensorData Cpu::to_data(const Primitive& p) {
  const StridedTensor c = contiguous(p);
  TensorData data(c.shape, c.dtype);
  if (data.nbytes() > 0) {
    std::memcpy(data.raw(), c.buffer->data() + c.offset * DTypeSize(c.dtype), data.nbytes());
  }
  return data;
}

Cpu::Primitive Cpu::full(const Shape& shape, Scalar value, DType dtype, const Device& device) {
  cpu::RequireDevice(device);
  StridedTensor t = StridedTensor::Empty(shape, dtype, device);
  VisitDType(dtype, [&](auto v) {
    using T = decltype(v);
    const T x = value.as<T>();
    T* out = t.mutable_data<T>();
    cpu::ParallelFor(device, shape.numel(), cpu::kElementwiseGrain,
                     [&](int64_t b, int64_t e) { std::fill(out + b, out + e, x); });
  });
  return t;
}

// Logical CPU devices share the process's memory and tensors are never written after they
// are made, so moving one is a relabelling, not a copy.
Cpu::Primitive Cpu::to_device(const Primitive& p, const Device& device) {
  cpu::RequireDevice(device);
  StridedTensor t = p;
  t.device = device;
  return t;
}

Cpu::Primitive Cpu::cast(const Primitive& p, DType dtype) { return cpu::CopyAs(p, dtype); }

Cpu::Primitive Cpu::contiguous(const Primitive& p) { return p.IsContiguous() ? p : cpu::CopyAs(p, p.dtype); }

Cpu::Primitive Cpu::reshape(const Primitive& p, const Shape& shape) { return strided::Reshaped(contiguous(p), shape); }

Cpu::Primitive Cpu::permute(const Primitive& p, absl::Span<const int64_t> dims) { return strided::Permute(p, dims); }

Cpu::Primitive Cpu::expand(const Primitive& p, const Shape& shape) { return strided::Expand(p, shape); }

Cpu::Primitive Cpu::slice(const Primitive& p, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return strided::Slice(p, dim, start, end, step);
}

MemoryUsage Cpu::memory_usage(const Device& d) {
  cpu::RequireDevice(d);
  return cpu::TensorMemory(d).usage();
}

void Cpu::reset_peak_memory(const Device& d) {
  cpu::RequireDevice(d);
  cpu::TensorMemory(d).ResetPeak();
}

absl::StatusOr<std::vector<CpuDevice>> Cpu::EnsureDevices(int n) {
  if (cpu::DeviceCount() < n) {
    if (absl::Status s = cpu::Configure({.devices = n}); !s.ok()) return s;
  }
  std::vector<CpuDevice> out;
  for (int i = 0; i < n; ++i) out.push_back(CpuDevice(i));
  return out;
}

}  // namespace kiln
