// What every Vulkan op shares: kernel names per dtype, the layout arithmetic that turns views
// into a kernel's (shape, strides) with as few dims as possible, and strided copies.
#ifndef KILN_BACKENDS_VULKAN_LAUNCH_H_
#define KILN_BACKENDS_VULKAN_LAUNCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_tensor.h"
#include "tensor/strided_view.h"

namespace kiln::vulkan {

// "f32", "i64", "bool": the suffix of typed kernels; "w16"/"w32"/"w64" of width-only ones.
std::string TypeSuffix(DType dtype);
std::string WidthSuffix(DType dtype);
int Kernel(const std::string& base, DType dtype);  // base + "_" + TypeSuffix
int WidthKernel(const std::string& base, DType dtype);

// Throws Unimplemented for f64 on a device without shaderFloat64.
void RequireDType(const Context& context, DType dtype, const char* op);

// A shape and one strides list per operand, with size-1 dims dropped and neighbouring dims
// merged where every operand allows it. rank() == 0 means a single element.
struct Layout {
  std::vector<int32_t> shape;
  std::vector<std::vector<int32_t>> strides;
  int rank() const { return static_cast<int>(shape.size()); }
};
// `keep` (if >= 0) is a dim that must stay separate (gather's dim); its position in the result
// is written to *kept.
Layout Coalesce(const Shape& shape, const std::vector<Dims>& strides, int64_t keep = -1, int* kept = nullptr);

using strided::BroadcastStrides;

// Device kernels index with 32-bit integers.
void CheckSize(const Shape& shape, const char* op);

// dst view = src view (same shape and dtype); dst must be fresh memory.
void CopyInto(const VulkanTensor& dst, const VulkanTensor& src);

// Fills params' arrays (shape then strides per operand, each `capacity` long) from a layout.
template <size_t N>
void Put(const std::vector<int32_t>& values, int32_t (&out)[N]) {
  for (size_t i = 0; i < N; ++i) out[i] = i < values.size() ? values[i] : 0;
}

}  // namespace kiln::vulkan

#endif  // KILN_BACKENDS_VULKAN_LAUNCH_H_
