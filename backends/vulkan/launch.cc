#include "backends/vulkan/launch.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "backends/vulkan/vulkan_backend.h"
#include "tensor/error.h"

namespace kiln::vulkan {

std::string TypeSuffix(DType dtype) { return DTypeName(dtype); }
std::string WidthSuffix(DType dtype) { return absl::StrCat("w", DeviceSize(dtype) * 8); }
int Kernel(const std::string& base, DType dtype) { return KernelId(absl::StrCat(base, "_", TypeSuffix(dtype))); }
int WidthKernel(const std::string& base, DType dtype) { return KernelId(absl::StrCat(base, "_", WidthSuffix(dtype))); }

void RequireDType(const Context& context, DType dtype, const char* op) {
  if (dtype == DType::kF64 && !context.has_f64()) {
    ThrowIfError(absl::UnimplementedError(
        absl::StrCat(op, ": ", context.name(), " has no 64-bit floats (shaderFloat64); use f32 on this device")));
  }
}

Layout Coalesce(const Shape& shape, const std::vector<Dims>& strides, int64_t keep, int* kept) {
  Layout l;
  l.strides.resize(strides.size());
  int kept_at = -1;
  const auto mergeable = [&](int64_t d) {
    if (l.shape.empty() || d == keep || kept_at == l.rank() - 1) return false;
    for (size_t k = 0; k < strides.size(); ++k) {
      if (l.strides[k].back() != strides[k][d] * shape[d]) return false;
    }
    return true;
  };
  for (int64_t d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1 && d != keep) continue;
    if (mergeable(d)) {
      l.shape.back() *= static_cast<int32_t>(shape[d]);
      for (size_t k = 0; k < strides.size(); ++k) l.strides[k].back() = static_cast<int32_t>(strides[k][d]);
      continue;
    }
    if (d == keep) kept_at = l.rank();
    l.shape.push_back(static_cast<int32_t>(shape[d]));
    for (size_t k = 0; k < strides.size(); ++k) l.strides[k].push_back(static_cast<int32_t>(strides[k][d]));
  }
  if (kept != nullptr) *kept = kept_at;
  return l;
}

void CheckSize(const Shape& shape, const char* op) {
  if (shape.numel() > std::numeric_limits<int32_t>::max()) {
    ThrowInvalidArgument("%s: %s has %d elements; Vulkan tensors hold fewer than 2^31", op, shape.ToString(),
                         shape.numel());
  }
}

namespace {

struct CopyParams {
  uint64_t dst, src;
  int32_t n, rank, pad0, pad1;
  int32_t shape[8], src_strides[8], dst_strides[8];
};
static_assert(sizeof(CopyParams) == 128);

}  // namespace

void CopyInto(const VulkanTensor& dst, const VulkanTensor& src) {
  const int64_t n = src.shape.numel();
  if (n == 0) return;
  CheckSize(src.shape, "copy");
  const Layout l = Coalesce(src.shape, {src.strides, dst.strides});
  if (l.rank() > 8) {  // rare: copy slice by slice along dim 0
    for (int64_t i = 0; i < src.shape[0]; ++i) {
      CopyInto(Vulkan::slice(dst, 0, i, i + 1, 1), Vulkan::slice(src, 0, i, i + 1, 1));
    }
    return;
  }
  CopyParams p{.dst = dst.address(), .src = src.address(), .n = static_cast<int32_t>(n), .rank = l.rank()};
  Put(l.shape, p.shape);
  Put(l.strides[0], p.src_strides);
  Put(l.strides[1], p.dst_strides);
  Context& c = dst.context();
  c.Launch(WidthKernel("copy", src.dtype), &p, sizeof(p), c.Linear(n));
}

}  // namespace kiln::vulkan
