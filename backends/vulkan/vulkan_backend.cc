// The Vulkan backend's creation, transfer and view operations.
#include "backends/vulkan/vulkan_backend.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "backends/vulkan/launch.h"
#include "tensor/cat_slots.h"
#include "tensor/strided_view.h"

namespace kiln {

using vulkan::Context;
using vulkan::DeviceSize;
using vulkan::VulkanTensor;

template <>
VulkanTensor VulkanTensor::Empty(const Shape& shape, DType dtype, const VulkanDevice& device) {
  vulkan::CheckSize(shape, "allocate");
  Context& context = Context::Of(device);
  // Every tensor is made here, so this one check keeps half kernels off devices that cannot
  // run them (their SPIR-V declares StorageBuffer16BitAccess).
  if (IsHalf(dtype) && !context.has_16bit_storage()) {
    throw Error(absl::UnimplementedError(
        absl::StrFormat("%s (%s) has no storageBuffer16BitAccess; %s tensors need it (use f32 on this device)",
                        device.ToString(), context.name(), DTypeName(dtype))));
  }
  return Dense(context.Allocate(shape.numel() * DeviceSize(dtype)), shape, dtype, device);
}

namespace {

struct FillParams {
  uint64_t dst, bits;
  int32_t n;
};

uint64_t Bits(Scalar value, DType dtype) {
  switch (dtype) {
    case DType::kF32: return std::bit_cast<uint32_t>(value.as<float>());
    case DType::kF64: return std::bit_cast<uint64_t>(value.as<double>());
    case DType::kI32: return static_cast<uint32_t>(value.as<int32_t>());
    case DType::kI64: return static_cast<uint64_t>(value.as<int64_t>());
    case DType::kBool: return value.as<bool>() ? 1 : 0;
    case DType::kBF16: return value.as<BFloat16>().bits;
    case DType::kF16: return value.as<Float16>().bits;
  }
  return 0;
}

}  // namespace

namespace vulkan {

VulkanTensor FromHost(const void* host, const Shape& shape, DType dtype, const VulkanDevice& device) {
  VulkanTensor t = VulkanTensor::Empty(shape, dtype, device);
  const int64_t n = shape.numel();
  Context& c = t.context();
  if (dtype == DType::kBool) {  // 1 byte on the host, 4 on the device
    std::vector<uint32_t> wide(n);
    const auto* b = static_cast<const unsigned char*>(host);
    for (int64_t i = 0; i < n; ++i) wide[i] = b[i] != 0;
    c.Upload(*t.buffer, wide.data(), n * 4);
    return t;
  }
  if (IsInteger(dtype) && n > 0) {  // remember the range: index checks need no read-back
    VisitDType(dtype, [&](auto v) {
      using T = decltype(v);
      if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
        const T* values = static_cast<const T*>(host);
        const auto [lo, hi] = std::minmax_element(values, values + n);
        t.buffer->known_range = std::make_pair(int64_t{*lo}, int64_t{*hi});
      }
    });
  }
  c.Upload(*t.buffer, host, n * DTypeSize(dtype));
  return t;
}

void ToHost(const VulkanTensor& t, void* host) {
  const VulkanTensor c = Vulkan::contiguous(t);
  const int64_t n = c.shape.numel();
  const int64_t at = c.offset * DeviceSize(c.dtype);
  if (c.dtype != DType::kBool) {
    c.context().Download(*c.buffer, at, host, n * DTypeSize(c.dtype));
    return;
  }
  std::vector<uint32_t> wide(n);
  c.context().Download(*c.buffer, at, wide.data(), n * 4);
  auto* out = static_cast<unsigned char*>(host);
  for (int64_t i = 0; i < n; ++i) out[i] = wide[i] != 0;
}

}  // namespace vulkan

Vulkan::Primitive Vulkan::from_data(const TensorData& data, const Device& device) {
  return vulkan::FromHost(const_cast<TensorData&>(data).raw(), data.shape(), data.dtype(), device);
}

TensorData Vulkan::to_data(const Primitive& p) {
  TensorData data(p.shape, p.dtype);
  vulkan::ToHost(p, data.raw());
  return data;
}

Vulkan::Primitive Vulkan::full(const Shape& shape, Scalar value, DType dtype, const Device& device) {
  VulkanTensor t = VulkanTensor::Empty(shape, dtype, device);
  const int64_t n = shape.numel();
  if (IsInteger(dtype)) {
    const int64_t v = dtype == DType::kI32 ? value.as<int32_t>() : value.as<int64_t>();
    t.buffer->known_range = std::make_pair(v, v);
  }
  if (n == 0) return t;
  FillParams p{.dst = t.address(), .bits = Bits(value, dtype), .n = static_cast<int32_t>(n)};
  Context& c = t.context();
  c.Launch(vulkan::WidthKernel("fill", dtype), &p, sizeof(p), c.Linear(n));
  return t;
}

// Virtual devices are separate logical devices: a move between them goes through the host.
Vulkan::Primitive Vulkan::to_device(const Primitive& p, const Device& device) {
  if (p.device == device) return p;
  ThrowIfError(vulkan::CheckDevice(device));
  return from_data(to_data(p), device);
}

Vulkan::Primitive Vulkan::contiguous(const Primitive& p) {
  if (p.IsContiguous()) return p;
  VulkanTensor out = VulkanTensor::Empty(p.shape, p.dtype, p.device);
  vulkan::CopyInto(out, p);
  out.buffer->known_range = p.buffer->known_range;  // same values, rearranged
  return out;
}

Vulkan::Primitive Vulkan::reshape(const Primitive& p, const Shape& shape) {
  return strided::Reshaped(contiguous(p), shape);
}

Vulkan::Primitive Vulkan::permute(const Primitive& p, absl::Span<const int64_t> dims) {
  return strided::Permute(p, dims);
}

Vulkan::Primitive Vulkan::expand(const Primitive& p, const Shape& shape) { return strided::Expand(p, shape); }

Vulkan::Primitive Vulkan::slice(const Primitive& p, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return strided::Slice(p, dim, start, end, step);
}

Vulkan::Primitive Vulkan::cat(absl::Span<const Primitive> parts, int64_t dim) {
  VulkanTensor out = VulkanTensor::Empty(CatShape(parts, dim), parts[0].dtype, parts[0].device);
  ForEachCatSlot(out, parts, dim,
                 [](const VulkanTensor& part, const VulkanTensor& slot) { vulkan::CopyInto(slot, part); });
  return out;
}

void Vulkan::synchronize(const Device& device) { Context::Of(device).Finish(); }

MemoryUsage Vulkan::memory_usage(const Device& d) { return Context::Of(d).tensor_memory().usage(); }

void Vulkan::reset_peak_memory(const Device& d) { Context::Of(d).tensor_memory().ResetPeak(); }

absl::StatusOr<std::vector<VulkanDevice>> Vulkan::EnsureDevices(int n) {
  absl::StatusOr<int> count = vulkan::DeviceCount();
  if (!count.ok()) return count.status();
  if (*count < n) {
    if (absl::Status s = vulkan::Configure({.virtual_devices = n}); !s.ok()) return s;
  }
  std::vector<VulkanDevice> out;
  for (int i = 0; i < n; ++i) out.push_back(VulkanDevice(i));
  return out;
}

}  // namespace kiln
