// Element-wise kernels: cast, unary maps, broadcasting binary ops and where.
#include "absl/strings/str_cat.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/vulkan_backend.h"
#include "tensor/half_in_f32.h"
#include "tensor/shape_rules.h"

namespace kiln {

using vulkan::Context;
using vulkan::Layout;
using vulkan::Put;
using vulkan::VulkanTensor;

namespace {

struct MapParams {  // unary.comp, cast.comp
  uint64_t out, x;
  int32_t n, rank, op, pad;
  int32_t shape[8], strides[8];
};
struct BinaryParams {
  uint64_t out, a, b;
  int32_t n, rank, op, pad;
  int32_t shape[6], sa[6], sb[6];
};
struct WhereParams {
  uint64_t out, cond, a, b;
  int32_t n, rank, pad0, pad1;
  int32_t shape[5], sc[5], sa[5], sb[5];
};
static_assert(sizeof(MapParams) <= 128 && sizeof(BinaryParams) <= 128 && sizeof(WhereParams) <= 128);

// The kernels' (shape, strides) for operands viewed at `shape`, in at most `max_rank` dims:
// operands whose dims will not merge are first copied dense (rare: views of rank > max_rank).
Layout Arrange(const Shape& shape, std::vector<VulkanTensor>& operands, int max_rank) {
  std::vector<Dims> strides;
  for (const auto& t : operands) strides.push_back(vulkan::BroadcastStrides(t, shape));
  Layout l = vulkan::Coalesce(shape, strides);
  if (l.rank() <= max_rank) return l;
  strides.clear();
  for (auto& t : operands) {
    t = Vulkan::contiguous(Vulkan::expand(t, shape));
    strides.push_back(t.strides);
  }
  return vulkan::Coalesce(shape, strides);
}

VulkanTensor Map(const std::string& kernel, int op, const VulkanTensor& x, DType out_dtype) {
  VulkanTensor out = VulkanTensor::Empty(x.shape, out_dtype, x.device);
  const int64_t n = x.shape.numel();
  if (n == 0) return out;
  std::vector<VulkanTensor> operands = {x};
  const Layout l = Arrange(x.shape, operands, 8);
  MapParams p{
      .out = out.address(), .x = operands[0].address(), .n = static_cast<int32_t>(n), .rank = l.rank(), .op = op};
  Put(l.shape, p.shape);
  Put(l.strides[0], p.strides);
  Context& c = x.context();
  c.Launch(vulkan::KernelId(kernel), &p, sizeof(p), c.Linear(n));
  return out;
}

// Integer division by zero is an error, as on the CPU. The divisor's values are known when it
// came from the host; otherwise they are read back and checked (integer division is rare).
void CheckDivisor(const VulkanTensor& a, const VulkanTensor& b) {
  if (const auto& range = b.buffer->known_range; range && (range->first > 0 || range->second < 0)) return;
  const TensorData values = Vulkan::to_data(b);
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (values.AsDouble(i) == 0) {
      ThrowInvalidArgument("div: integer division by zero (%s%s / %s%s)", DTypeName(a.dtype), a.shape.ToString(),
                           DTypeName(b.dtype), b.shape.ToString());
    }
  }
}

}  // namespace

Vulkan::Primitive Vulkan::cast(const Primitive& p, DType dtype) {
  if (p.dtype == dtype) return contiguous(p);
  Context& c = p.context();
  vulkan::RequireDType(c, p.dtype, "cast");
  vulkan::RequireDType(c, dtype, "cast");
  return Map(absl::StrCat("cast_", DTypeName(p.dtype), "_", DTypeName(dtype)), 0, p, dtype);
}

Vulkan::Primitive Vulkan::unary(UnaryOp op, const Primitive& x) {
  if (IsHalf(x.dtype)) return HalfInF32<Vulkan>::unary(op, x);
  if (x.dtype == DType::kBool || (IsInteger(x.dtype) && NeedsFloating(op))) {
    ThrowInvalidArgument("%s: not defined for %s", OpName(op), DTypeName(x.dtype));
  }
  vulkan::RequireDType(x.context(), x.dtype, OpName(op));
  return Map(absl::StrCat("unary_", DTypeName(x.dtype)), static_cast<int>(op), x, x.dtype);
}

Vulkan::Primitive Vulkan::binary(BinaryOp op, const Primitive& a, const Primitive& b) {
  if (IsHalf(a.dtype)) return HalfInF32<Vulkan>::binary(op, a, b);
  const bool compare = IsComparison(op);
  if (!compare && (a.dtype == DType::kBool || (IsInteger(a.dtype) && op == BinaryOp::kPow))) {
    ThrowInvalidArgument("%s: not defined for %s", OpName(op), DTypeName(a.dtype));
  }
  vulkan::RequireDType(a.context(), a.dtype, OpName(op));
  if (op == BinaryOp::kDiv && IsInteger(a.dtype)) CheckDivisor(a, b);
  const Shape shape = *BroadcastShapes(a.shape, b.shape);
  VulkanTensor out = VulkanTensor::Empty(shape, compare ? DType::kBool : a.dtype, a.device);
  const int64_t n = shape.numel();
  if (n == 0) return out;
  std::vector<VulkanTensor> operands = {a, b};
  const Layout l = Arrange(shape, operands, 6);
  BinaryParams p{.out = out.address(),
                 .a = operands[0].address(),
                 .b = operands[1].address(),
                 .n = static_cast<int32_t>(n),
                 .rank = l.rank(),
                 .op = static_cast<int32_t>(op)};
  Put(l.shape, p.shape);
  Put(l.strides[0], p.sa);
  Put(l.strides[1], p.sb);
  Context& c = a.context();
  c.Launch(vulkan::Kernel("binary", a.dtype), &p, sizeof(p), c.Linear(n));
  return out;
}

Vulkan::Primitive Vulkan::where(const Primitive& cond, const Primitive& a, const Primitive& b) {
  const Shape shape = *BroadcastShapes(*BroadcastShapes(a.shape, b.shape), cond.shape);
  VulkanTensor out = VulkanTensor::Empty(shape, a.dtype, a.device);
  const int64_t n = shape.numel();
  if (n == 0) return out;
  std::vector<VulkanTensor> operands = {cond, a, b};
  const Layout l = Arrange(shape, operands, 5);
  WhereParams p{.out = out.address(),
                .cond = operands[0].address(),
                .a = operands[1].address(),
                .b = operands[2].address(),
                .n = static_cast<int32_t>(n),
                .rank = l.rank()};
  Put(l.shape, p.shape);
  Put(l.strides[0], p.sc);
  Put(l.strides[1], p.sa);
  Put(l.strides[2], p.sb);
  Context& c = a.context();
  c.Launch(vulkan::WidthKernel("where", a.dtype), &p, sizeof(p), c.Linear(n));
  return out;
}

}  // namespace kiln
