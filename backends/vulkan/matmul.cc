// Batched matmul: one launch of a shared-memory tiled kernel over every batch. Operands are
// read through their strides, so transposed views and broadcast batch dims cost no copy.
#include "backends/vulkan/launch.h"
#include "backends/vulkan/vulkan_backend.h"
#include "tensor/half_in_f32.h"
#include "tensor/shape_rules.h"

namespace kiln {

using vulkan::Context;
using vulkan::VulkanTensor;

namespace {

struct MatmulParams {
  uint64_t c, a, b;
  int32_t m, n, k, batch;
  int32_t a_rs, a_cs, a_bs, b_rs, b_cs, b_bs;
};
static_assert(sizeof(MatmulParams) <= 128);

constexpr int64_t kTile = 64;

// `t` ([..., rows, cols]) broadcast to batch + [rows, cols].
VulkanTensor ExpandBatch(const VulkanTensor& t, const Dims& batch) {
  Dims dims = batch;
  dims.push_back(t.shape[t.shape.rank() - 2]);
  dims.push_back(t.shape[t.shape.rank() - 1]);
  return Vulkan::expand(t, Shape(dims));
}

// The batch dims of both operands as one stride each; copies an operand whose batch dims do
// not merge (a batch of non-uniformly strided views).
std::pair<int32_t, int32_t> BatchStrides(VulkanTensor& a, VulkanTensor& b, const Dims& batch) {
  const auto lead = [&](const VulkanTensor& t) { return Dims(t.strides.begin(), t.strides.begin() + batch.size()); };
  vulkan::Layout l = vulkan::Coalesce(Shape(batch), {lead(a), lead(b)});
  if (l.rank() > 1) {
    a = Vulkan::contiguous(a);
    b = Vulkan::contiguous(b);
    l = vulkan::Coalesce(Shape(batch), {lead(a), lead(b)});
  }
  if (l.rank() == 0) return {0, 0};
  return {l.strides[0][0], l.strides[1][0]};
}

}  // namespace

Vulkan::Primitive Vulkan::matmul(const Primitive& a_in, const Primitive& b_in) {
  if (IsHalf(a_in.dtype)) return HalfInF32<Vulkan>::matmul(a_in, b_in);
  Context& c = a_in.context();
  vulkan::RequireDType(c, a_in.dtype, "matmul");
  const Shape out_shape = *MatmulShape(a_in.shape, b_in.shape).out;
  const int64_t rank = out_shape.rank();
  const int64_t m = out_shape[rank - 2], n = out_shape[rank - 1], k = a_in.shape[a_in.shape.rank() - 1];
  const Dims batch(out_shape.dims().begin(), out_shape.dims().end() - 2);
  VulkanTensor out = VulkanTensor::Empty(out_shape, a_in.dtype, a_in.device);
  if (out_shape.numel() == 0) return out;
  if (k == 0) return full(out_shape, Scalar(0), a_in.dtype, a_in.device);
  vulkan::CheckSize(a_in.shape, "matmul");
  vulkan::CheckSize(b_in.shape, "matmul");
  VulkanTensor a = ExpandBatch(a_in, batch), b = ExpandBatch(b_in, batch);
  const auto [a_bs, b_bs] = BatchStrides(a, b, batch);
  const int64_t batches = out_shape.numel() / (m * n);
  const int64_t r = batch.size();
  MatmulParams p{.c = out.address(),
                 .a = a.address(),
                 .b = b.address(),
                 .m = static_cast<int32_t>(m),
                 .n = static_cast<int32_t>(n),
                 .k = static_cast<int32_t>(k),
                 .batch = static_cast<int32_t>(batches),
                 .a_rs = static_cast<int32_t>(a.strides[r]),
                 .a_cs = static_cast<int32_t>(a.strides[r + 1]),
                 .a_bs = a_bs,
                 .b_rs = static_cast<int32_t>(b.strides[r]),
                 .b_cs = static_cast<int32_t>(b.strides[r + 1]),
                 .b_bs = b_bs};
  vulkan::Groups g{.x = static_cast<uint32_t>((n + kTile - 1) / kTile),
                   .y = static_cast<uint32_t>((m + kTile - 1) / kTile),
                   .z = static_cast<uint32_t>(std::min<int64_t>(batches, 65535))};
  c.Launch(vulkan::Kernel("matmul", a.dtype), &p, sizeof(p), g);
  return out;
}

}  // namespace kiln
