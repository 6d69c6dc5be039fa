// VulkanTensor: the Vulkan backend's primitive, the shared StridedArray (tensor/strided_array.h)
// over a chunk of device memory (memory_pool.h). bool is stored as 32 bits on the device (see
// DeviceSize); bf16 and f16 as their 2 bytes, as on the host.
#ifndef KILN_BACKENDS_VULKAN_VULKAN_TENSOR_H_
#define KILN_BACKENDS_VULKAN_VULKAN_TENSOR_H_

#include <cstdint>

#include "backends/vulkan/context.h"
#include "backends/vulkan/vulkan_device.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"
#include "tensor/strided_array.h"

namespace kiln {
namespace vulkan {

// Bytes per element on the device.
inline int64_t DeviceSize(DType dtype) { return dtype == DType::kBool ? 4 : DTypeSize(dtype); }

using VulkanTensor = StridedArray<Chunk, VulkanDevice, DeviceSize>;

}  // namespace vulkan

// Allocates the Chunk from the device's pool (vulkan_backend.cc).
template <>
vulkan::VulkanTensor vulkan::VulkanTensor::Empty(const Shape& shape, DType dtype, const VulkanDevice& device);

}  // namespace kiln

#endif  // KILN_BACKENDS_VULKAN_VULKAN_TENSOR_H_
