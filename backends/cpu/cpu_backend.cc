// The CPU backend's creation, transfer and view operations.
#include "backends/cpu/cpu_backend.h"

#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"

namespace kiln {

using cpu::StridedTensor;

namespace cpu {

void RequireDevice(const CpuDevice& device) { ThrowIfError(CheckDevice(device)); }

Dims BroadcastStrides(const StridedTensor& t, const Shape& out) {
  Dims strides(out.rank(), 0);
  const int64_t lead = out.rank() - t.shape.rank();
  for (int64_t i = 0; i < t.shape.rank(); ++i) {
    strides[lead + i] = t.shape[i] == 1 ? 0 : t.strides[i];
  }
  return strides;
}

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
    cpu::ParallelFor(device, shape.numel(), cpu::kElementwiseGrain, [&](int64_t b, int64_t e) {
      std::fill(out + b, out + e, x);
    });
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

Cpu::Primitive Cpu::contiguous(const Primitive& p) {
  return p.IsContiguous() ? p : cpu::CopyAs(p, p.dtype);
}

Cpu::Primitive Cpu::reshape(const Primitive& p, const Shape& shape) {
  StridedTensor t = contiguous(p);
  t.shape = shape;
  t.strides = shape.ContiguousStrides();
  return t;
}

Cpu::Primitive Cpu::permute(const Primitive& p, absl::Span<const int64_t> dims) {
  StridedTensor t = p;
  Dims shape(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    shape[i] = p.shape[dims[i]];
    t.strides[i] = p.strides[dims[i]];
  }
  t.shape = Shape(shape);
  return t;
}

Cpu::Primitive Cpu::expand(const Primitive& p, const Shape& shape) {
  StridedTensor t = p;
  t.strides = cpu::BroadcastStrides(p, shape);
  t.shape = shape;
  return t;
}

Cpu::Primitive Cpu::slice(const Primitive& p, int64_t dim, int64_t start, int64_t end,
                          int64_t step) {
  StridedTensor t = p;
  const int64_t size = (end - start + step - 1) / step;
  Dims shape(p.shape.dims().begin(), p.shape.dims().end());
  shape[dim] = size;
  t.shape = Shape(shape);
  if (size > 0) t.offset += start * p.strides[dim];
  t.strides[dim] = p.strides[dim] * step;
  return t;
}

}  // namespace kiln
