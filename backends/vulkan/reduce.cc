// Reductions (sum, mean, max, min) and argmax. The input is arranged as a contiguous
// [outer, len, inner]; long rows (inner == 1) are reduced by workgroups with a shared-memory
// tree, split into chunks and finished by a second pass when there are few of them; short or
// strided reductions by one invocation per output.
#include <cmath>

#include "backends/vulkan/launch.h"
#include "backends/vulkan/vulkan_backend.h"
#include "tensor/shape_rules.h"

namespace kiln {

using vulkan::Context;
using vulkan::VulkanTensor;

namespace {

struct RowParams {  // reduce_rows.comp
  uint64_t out, x;
  int32_t len, chunks, chunk_len, op, count;
};
struct ColParams {  // reduce_cols.comp, argmax.comp
  uint64_t out, x;
  int32_t outer, len, inner, op, count;
};

// Rows shorter than this are reduced one invocation per row.
constexpr int64_t kShortRow = 64;
// Elements each workgroup of a split row reduces.
constexpr int64_t kChunk = 8192;

struct Arranged {
  VulkanTensor x;  // contiguous, the reduced dims one block
  int64_t outer = 1, len = 1, inner = 1;
};

// Makes the reduced dims one contiguous block: already so when they are consecutive,
// otherwise they are permuted to the end (one copy).
Arranged Arrange(const VulkanTensor& p, absl::Span<const int64_t> dims) {
  Arranged a;
  if (dims.back() - dims.front() + 1 == static_cast<int64_t>(dims.size())) {
    a.x = Vulkan::contiguous(p);
    for (int64_t d = 0; d < p.shape.rank(); ++d) {
      (d < dims.front() ? a.outer : d <= dims.back() ? a.len : a.inner) *= p.shape[d];
    }
    return a;
  }
  Dims perm;
  for (int64_t d = 0, k = 0; d < p.shape.rank(); ++d) {
    if (k < static_cast<int64_t>(dims.size()) && dims[k] == d) {
      ++k;
      a.len *= p.shape[d];
    } else {
      perm.push_back(d);
      a.outer *= p.shape[d];
    }
  }
  perm.insert(perm.end(), dims.begin(), dims.end());
  a.x = Vulkan::contiguous(Vulkan::permute(p, perm));
  return a;
}

void ReduceRows(int kernel, int op, const Arranged& a, const VulkanTensor& out) {
  Context& c = out.context();
  const int64_t chunks = a.outer >= 256 ? 1 : std::min<int64_t>(1024, (a.len + kChunk - 1) / kChunk);
  if (chunks == 1) {
    RowParams p{.out = out.address(), .x = a.x.address(), .len = static_cast<int32_t>(a.len), .chunks = 1,
                .chunk_len = static_cast<int32_t>(a.len), .op = op, .count = static_cast<int32_t>(a.len)};
    c.Launch(kernel, &p, sizeof(p), c.Exact(a.outer, 1));
    return;
  }
  const int64_t chunk_len = (a.len + chunks - 1) / chunks;
  const VulkanTensor partial = VulkanTensor::Empty(Shape({a.outer, chunks}), out.dtype, out.device);
  RowParams first{.out = partial.address(), .x = a.x.address(), .len = static_cast<int32_t>(a.len),
                  .chunks = static_cast<int32_t>(chunks), .chunk_len = static_cast<int32_t>(chunk_len),
                  .op = op, .count = 0};
  c.Launch(kernel, &first, sizeof(first), c.Exact(a.outer * chunks, 1));
  RowParams second{.out = out.address(), .x = partial.address(), .len = static_cast<int32_t>(chunks),
                   .chunks = 1, .chunk_len = static_cast<int32_t>(chunks), .op = op,
                   .count = static_cast<int32_t>(a.len)};
  c.Launch(kernel, &second, sizeof(second), c.Exact(a.outer, 1));
}

}  // namespace

Vulkan::Primitive Vulkan::reduce(ReduceOp op, const Primitive& p, absl::Span<const int64_t> dims, bool keepdim) {
  if (p.dtype == DType::kBool) ThrowInvalidArgument("%s: not defined for bool", OpName(op));
  vulkan::RequireDType(p.context(), p.dtype, OpName(op));
  const Shape out_shape = ReducedShape(p.shape, dims, keepdim);
  int64_t extent = 1;
  for (int64_t d : dims) extent *= p.shape[d];
  if (extent == 0) {  // only sum and mean reach here: 0, and 0/0 for floats
    return full(out_shape, op == ReduceOp::kMean && IsFloating(p.dtype) ? Scalar(NAN) : Scalar(0),
                p.dtype, p.device);
  }
  VulkanTensor out = VulkanTensor::Empty(out_shape, p.dtype, p.device);
  if (out_shape.numel() == 0) return out;
  const Arranged a = Arrange(p, dims);
  const int code = static_cast<int>(op);
  if (a.inner == 1 && a.len > kShortRow) {
    ReduceRows(vulkan::Kernel("reduce_rows", p.dtype), code, a, out);
  } else {
    ColParams params{.out = out.address(), .x = a.x.address(), .outer = static_cast<int32_t>(a.outer),
                     .len = static_cast<int32_t>(a.len), .inner = static_cast<int32_t>(a.inner), .op = code,
                     .count = static_cast<int32_t>(a.len)};
    Context& c = p.context();
    c.Launch(vulkan::Kernel("reduce_cols", p.dtype), &params, sizeof(params), c.Linear(a.outer * a.inner));
  }
  return out;
}

Vulkan::Primitive Vulkan::argmax(const Primitive& p, int64_t dim, bool keepdim) {
  vulkan::RequireDType(p.context(), p.dtype, "argmax");
  const int64_t dims[] = {dim};
  const Shape out_shape = ReducedShape(p.shape, dims, keepdim);
  VulkanTensor out = VulkanTensor::Empty(out_shape, DType::kI64, p.device);
  if (out_shape.numel() == 0) return out;
  const Arranged a = Arrange(p, dims);
  ColParams params{.out = out.address(), .x = a.x.address(), .outer = static_cast<int32_t>(a.outer),
                   .len = static_cast<int32_t>(a.len), .inner = static_cast<int32_t>(a.inner)};
  Context& c = p.context();
  c.Launch(vulkan::Kernel("argmax", p.dtype), &params, sizeof(params), c.Linear(a.outer * a.inner));
  out.chunk->known_range = std::make_pair(int64_t{0}, a.len - 1);  // safe to index with
  return out;
}

}  // namespace kiln
