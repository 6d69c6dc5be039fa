// VulkanTensor: the Vulkan backend's primitive, a strided view (shape, strides, offset) of a
// chunk of device memory, so transpose, permute, slice and expand are free. Chunks are never
// written after the op that made them, which is what makes sharing them safe. bool is stored
// as 32 bits on the device (see DeviceSize); bf16 and f16 as their 2 bytes, as on the host.
#ifndef KILN_BACKENDS_VULKAN_VULKAN_TENSOR_H_
#define KILN_BACKENDS_VULKAN_VULKAN_TENSOR_H_

#include <memory>

#include "backends/vulkan/context.h"
#include "backends/vulkan/vulkan_device.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace kiln::vulkan {

// Bytes per element on the device.
inline int64_t DeviceSize(DType dtype) { return dtype == DType::kBool ? 4 : DTypeSize(dtype); }

struct VulkanTensor {
  std::shared_ptr<Chunk> chunk;
  Shape shape{0};
  Dims strides{1};     // in elements; 0 for a broadcast dim
  int64_t offset = 0;  // in elements
  DType dtype = DType::kF32;
  VulkanDevice device;

  // A fresh row-major tensor (contents uninitialised).
  static VulkanTensor Empty(const Shape& shape, DType dtype, const VulkanDevice& device);

  bool IsContiguous() const;
  // The device address of element [0, ..., 0].
  uint64_t address() const { return chunk->address() + offset * DeviceSize(dtype); }
  Context& context() const { return chunk->context(); }
};

}  // namespace kiln::vulkan

#endif  // KILN_BACKENDS_VULKAN_VULKAN_TENSOR_H_
