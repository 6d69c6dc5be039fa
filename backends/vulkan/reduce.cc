// Reductions (sum, mean, max, min) and argmax. The input is arranged as a contiguous
// [outer, len, inner]; long rows (inner == 1) are reduced by workgroups with a shared-memory
// tree, split into chunks and finished by a second pass when there are few of them; short or
// strided reductions by one invocation per output.
#include <cmath>

#include "backends/vulkan/launch.h"
#include "backends/vulkan/vulkan_backend.h"
#include "tensor/half_in_f32.h"
#include "tensor/reduce_layout.h"
#include "tensor/shape_rules.h"

namespace kiln {

using vulkan::Context;
using vulkan::VulkanTensor;

namespace {

struct RowParams {  // reduce_rows.comp
  uint64_t out, x;
  int32_t len, chunks, chunk_len, op, count, groups;  // groups: the workgroups that have work
};
struct ColParams {  // reduce_cols.comp, argmax.comp
  uint64_t out, x;
  int32_t outer, len, inner, op, count;
};

// Rows shorter than this are reduced one invocation per row.
constexpr int64_t kShortRow = 64;
// Elements each workgroup of a split row reduces.
constexpr int64_t kChunk = 8192;

// `x`: the dense [outer, reduced, 1] input that `l` describes.
void ReduceRows(int kernel, int op, const VulkanTensor& x, const ReduceLayout& l, const VulkanTensor& out) {
  Context& c = out.context();
  const int64_t chunks = l.outer >= 256 ? 1 : std::min<int64_t>(1024, (l.reduced + kChunk - 1) / kChunk);
  if (chunks == 1) {
    RowParams p{.out = out.address(),
                .x = x.address(),
                .len = static_cast<int32_t>(l.reduced),
                .chunks = 1,
                .chunk_len = static_cast<int32_t>(l.reduced),
                .op = op,
                .count = static_cast<int32_t>(l.reduced),
                .groups = static_cast<int32_t>(l.outer)};
    c.Launch(kernel, &p, sizeof(p), c.Exact(l.outer, 1));
    return;
  }
  const int64_t chunk_len = (l.reduced + chunks - 1) / chunks;
  const VulkanTensor partial = VulkanTensor::Empty(Shape({l.outer, chunks}), out.dtype, out.device);
  RowParams first{.out = partial.address(),
                  .x = x.address(),
                  .len = static_cast<int32_t>(l.reduced),
                  .chunks = static_cast<int32_t>(chunks),
                  .chunk_len = static_cast<int32_t>(chunk_len),
                  .op = op,
                  .count = 0,
                  .groups = static_cast<int32_t>(l.outer * chunks)};
  c.Launch(kernel, &first, sizeof(first), c.Exact(l.outer * chunks, 1));
  RowParams second{.out = out.address(),
                   .x = partial.address(),
                   .len = static_cast<int32_t>(chunks),
                   .chunks = 1,
                   .chunk_len = static_cast<int32_t>(chunks),
                   .op = op,
                   .count = static_cast<int32_t>(l.reduced),
                   .groups = static_cast<int32_t>(l.outer)};
  c.Launch(kernel, &second, sizeof(second), c.Exact(l.outer, 1));
}

}  // namespace

Vulkan::Primitive Vulkan::reduce(ReduceOp op, const Primitive& p, absl::Span<const int64_t> dims, bool keepdim) {
  if (IsHalf(p.dtype)) return HalfInF32<Vulkan>::reduce(op, p, dims, keepdim);
  if (p.dtype == DType::kBool) ThrowInvalidArgument("%s: not defined for bool", OpName(op));
  vulkan::RequireDType(p.context(), p.dtype, OpName(op));
  const Shape out_shape = ReducedShape(p.shape, dims, keepdim);
  const ReduceLayout l = ArrangeReduce(p.shape, dims);  // shape arithmetic only: no copy yet
  if (l.reduced == 0) {                                 // only sum and mean reach here: 0, and 0/0 for floats
    return full(out_shape, op == ReduceOp::kMean && IsFloating(p.dtype) ? Scalar(NAN) : Scalar(0), p.dtype, p.device);
  }
  VulkanTensor out = VulkanTensor::Empty(out_shape, p.dtype, p.device);
  if (out_shape.numel() == 0) return out;
  const VulkanTensor x = ArrangeForReduce<Vulkan>(p, l);
  const int code = static_cast<int>(op);
  if (l.inner == 1 && l.reduced > kShortRow) {
    ReduceRows(vulkan::Kernel("reduce_rows", p.dtype), code, x, l, out);
  } else {
    ColParams params{.out = out.address(),
                     .x = x.address(),
                     .outer = static_cast<int32_t>(l.outer),
                     .len = static_cast<int32_t>(l.reduced),
                     .inner = static_cast<int32_t>(l.inner),
                     .op = code,
                     .count = static_cast<int32_t>(l.reduced)};
    Context& c = p.context();
    c.Launch(vulkan::Kernel("reduce_cols", p.dtype), &params, sizeof(params), c.Linear(l.outer * l.inner));
  }
  return out;
}

Vulkan::Primitive Vulkan::argmax(const Primitive& p, int64_t dim, bool keepdim) {
  if (IsHalf(p.dtype)) return HalfInF32<Vulkan>::argmax(p, dim, keepdim);
  vulkan::RequireDType(p.context(), p.dtype, "argmax");
  const int64_t dims[] = {dim};
  const Shape out_shape = ReducedShape(p.shape, dims, keepdim);
  VulkanTensor out = VulkanTensor::Empty(out_shape, DType::kI64, p.device);
  if (out_shape.numel() == 0) return out;
  const ReduceLayout l = ArrangeReduce(p.shape, dims);
  const VulkanTensor x = ArrangeForReduce<Vulkan>(p, l);
  ColParams params{.out = out.address(),
                   .x = x.address(),
                   .outer = static_cast<int32_t>(l.outer),
                   .len = static_cast<int32_t>(l.reduced),
                   .inner = static_cast<int32_t>(l.inner)};
  Context& c = p.context();
  c.Launch(vulkan::Kernel("argmax", p.dtype), &params, sizeof(params), c.Linear(l.outer * l.inner));
  out.buffer->known_range = std::make_pair(int64_t{0}, l.reduced - 1);  // safe to index with
  return out;
}

}  // namespace kiln
