// gather, index_select and scatter_add: the ops that move elements by index. Index values are
// user data, checked before any kernel reads through them: free when the index came from the
// host (its range is recorded at upload) or from argmax, a read-back otherwise.
#include "absl/strings/str_cat.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/vulkan_backend.h"
#include "tensor/half_in_f32.h"
#include "tensor/index_check.h"

namespace kiln {

using vulkan::Context;
using vulkan::Layout;
using vulkan::Put;
using vulkan::VulkanTensor;

namespace {

struct GatherParams {
  uint64_t out, src, index;
  int32_t n, rank, dim, dim_size;
  int32_t shape[5], src_strides[5], index_strides[5];
};
struct ScatterParams {
  uint64_t out, src, index;
  int32_t n, rank, dim, dim_size;
  int32_t shape[5], src_strides[5], index_strides[5], out_strides[5];
};
static_assert(sizeof(GatherParams) <= 128 && sizeof(ScatterParams) <= 128);

void CheckIndices(const VulkanTensor& index, int64_t size, const char* what, const Shape& source) {
  if (const auto& r = index.buffer->known_range; r && r->first >= 0 && r->second < size) return;
  const TensorData values = Vulkan::to_data(index);
  CheckIndexValues(values.values<int64_t>().data(), values.numel(), size, what, source);
}

// The kernels take rank <= 5 after merging dims (the indexed dim stays apart); a view that
// does not fit is made dense first, which merges everything but the indexed dim.
Layout Arrange(const Shape& shape, std::vector<VulkanTensor*> operands, std::vector<Dims> strides, int64_t dim,
               int* kept) {
  Layout l = vulkan::Coalesce(shape, strides, dim, kept);
  if (l.rank() <= 5) return l;
  for (size_t k = 0; k < operands.size(); ++k) {
    if (operands[k] == nullptr) continue;
    *operands[k] = Vulkan::contiguous(*operands[k]);
    strides[k] = operands[k]->strides;
  }
  l = vulkan::Coalesce(shape, strides, dim, kept);
  if (l.rank() > 5) {
    ThrowIfError(absl::UnimplementedError("vulkan: gather/scatter over views of rank > 5 that do not merge"));
  }
  return l;
}

}  // namespace

Vulkan::Primitive Vulkan::gather(const Primitive& p, int64_t dim, const Primitive& index_in) {
  CheckIndices(index_in, p.shape[dim], "gather", p.shape);
  VulkanTensor out = VulkanTensor::Empty(index_in.shape, p.dtype, p.device);
  const int64_t n = index_in.shape.numel();
  if (n == 0) return out;
  VulkanTensor src = p, index = index_in;
  int kept = -1;
  const Layout l = Arrange(index.shape, {&src, &index}, {src.strides, index.strides}, dim, &kept);
  // The source's stride along dim is the one the gathered coordinate uses, even if dim was
  // merged away in the index's layout (kept == -1 means extent 1, handled by the stride list).
  GatherParams params{.out = out.address(),
                      .src = src.address(),
                      .index = index.address(),
                      .n = static_cast<int32_t>(n),
                      .rank = l.rank(),
                      .dim = kept,
                      .dim_size = static_cast<int32_t>(p.shape[dim])};
  Put(l.shape, params.shape);
  Put(l.strides[0], params.src_strides);
  Put(l.strides[1], params.index_strides);
  params.src_strides[kept] = static_cast<int32_t>(src.strides[dim]);
  Context& c = p.context();
  c.Launch(vulkan::WidthKernel("gather", p.dtype), &params, sizeof(params), c.Linear(n));
  return out;
}

// gather with the 1-D index laid along `dim` and broadcast over the other dims: no copy.
Vulkan::Primitive Vulkan::index_select(const Primitive& p, int64_t dim, const Primitive& index) {
  CheckIndices(index, p.shape[dim], "index_select", p.shape);
  Dims dims(p.shape.dims().begin(), p.shape.dims().end());
  dims[dim] = index.shape[0];
  VulkanTensor spread = index;
  spread.shape = Shape(dims);
  spread.strides = Dims(dims.size(), 0);
  spread.strides[dim] = index.strides[0];
  return gather(p, dim, spread);
}

Vulkan::Primitive Vulkan::scatter_add(const Primitive& src_in, int64_t dim, const Primitive& index_in,
                                      const Shape& shape) {
  if (IsHalf(src_in.dtype)) return HalfInF32<Vulkan>::scatter_add(src_in, dim, index_in, shape);
  Context& c = src_in.context();
  vulkan::RequireDType(c, src_in.dtype, "scatter_add");
  if (src_in.dtype == DType::kF64 && !c.has_int64_atomics()) {
    ThrowIfError(absl::UnimplementedError(absl::StrCat(
        "scatter_add: ", c.name(), " has no 64-bit atomics (shaderBufferInt64Atomics); use f32 on this device")));
  }
  if (src_in.dtype == DType::kBool) ThrowInvalidArgument("scatter_add: not defined for bool");
  CheckIndices(index_in, shape[dim], "scatter_add", shape);
  VulkanTensor out = full(shape, Scalar(0), src_in.dtype, src_in.device);
  out.buffer->known_range.reset();
  const int64_t n = src_in.shape.numel();
  if (n == 0) return out;
  VulkanTensor src = src_in, index = index_in;
  int kept = -1;
  // The output is walked at the source's positions, so its strides join the merge only where
  // they agree with the source's extents: use the output's dense strides over src's shape.
  const Dims out_strides = shape.ContiguousStrides();
  const Layout l = Arrange(src.shape, {&src, &index, nullptr}, {src.strides, index.strides, out_strides}, dim, &kept);
  ScatterParams params{.out = out.address(),
                       .src = src.address(),
                       .index = index.address(),
                       .n = static_cast<int32_t>(n),
                       .rank = l.rank(),
                       .dim = kept,
                       .dim_size = static_cast<int32_t>(shape[dim])};
  Put(l.shape, params.shape);
  Put(l.strides[0], params.src_strides);
  Put(l.strides[1], params.index_strides);
  Put(l.strides[2], params.out_strides);
  params.out_strides[kept] = static_cast<int32_t>(out_strides[dim]);
  c.Launch(vulkan::Kernel("scatter_add", src.dtype), &params, sizeof(params), c.Linear(n));
  return out;
}

}  // namespace kiln
