// Unary maps, broadcasting binary ops and where: the output is dense and every operand is
// read through its own (broadcast) strides in the kernel, without copies.
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/launch.h"
#include "tensor/shape_rules.h"

namespace kiln {

using cuda::StridedTensor;

Cuda::Primitive Cuda::unary(UnaryOp op, const Primitive& x) {
  if (x.dtype == DType::kBool) ThrowInvalidArgument("%s: not defined for bool", OpName(op));
  if (IsInteger(x.dtype) && NeedsFloating(op)) {
    ThrowInvalidArgument("%s: not defined for %s", OpName(op), DTypeName(x.dtype));
  }
  cuda::DeviceContext& c = cuda::Context(x.device);
  cuda::Await(c, {&x});
  StridedTensor out = StridedTensor::Empty(x.shape, x.dtype, x.device);
  const auto index = cuda::IndexFor<2>(x.shape, {out.strides, x.strides}, OpName(op));
  cuda::CheckLaunch(cuda::kernels::Unary(op, x.dtype, x.data(), out.mutable_data(), index, x.shape.numel(), c.stream),
                    OpName(op), x.device);
  return out;
}

Cuda::Primitive Cuda::binary(BinaryOp op, const Primitive& a, const Primitive& b) {
  const bool compare = IsComparison(op);
  if (!compare && a.dtype == DType::kBool) ThrowInvalidArgument("%s: not defined for bool", OpName(op));
  if (op == BinaryOp::kPow && !IsFloating(a.dtype)) {
    ThrowInvalidArgument("%s: not defined for %s", OpName(op), DTypeName(a.dtype));
  }
  const Shape shape = *BroadcastShapes(a.shape, b.shape);
  cuda::DeviceContext& c = cuda::Context(a.device);
  cuda::Await(c, {&a, &b});
  StridedTensor out = StridedTensor::Empty(shape, compare ? DType::kBool : a.dtype, a.device);
  const auto index = cuda::IndexFor<3>(
      shape, {out.strides, cuda::BroadcastStrides(a, shape), cuda::BroadcastStrides(b, shape)}, OpName(op));
  // Integer division checks its divisors on the device: a flag the kernel sets, read back
  // here (a synchronising read, only for integer division).
  const bool checks_zero = op == BinaryOp::kDiv && IsInteger(a.dtype);
  std::unique_ptr<cuda::DeviceBuffer> flag;
  if (checks_zero) {
    flag = std::make_unique<cuda::DeviceBuffer>(a.device, sizeof(int));
    cuda::ThrowIfCuda(cudaMemsetAsync(flag->data(), 0, sizeof(int), c.stream), "div: cudaMemsetAsync");
  }
  cuda::CheckLaunch(cuda::kernels::Binary(op, a.dtype, a.data(), b.data(), out.mutable_data(), index, shape.numel(),
                                          checks_zero ? reinterpret_cast<int*>(flag->data()) : nullptr, c.stream),
                    OpName(op), a.device);
  if (checks_zero) {
    int by_zero = 0;
    cuda::ReadBack(c, flag->data(), &by_zero, sizeof(int), "div (the integer division-by-zero check)");
    if (by_zero != 0) {
      ThrowInvalidArgument("div: integer division by zero (%s%s / %s%s)", DTypeName(a.dtype), a.shape.ToString(),
                           DTypeName(b.dtype), b.shape.ToString());
    }
  }
  return out;
}

Cuda::Primitive Cuda::where(const Primitive& cond, const Primitive& a, const Primitive& b) {
  const Shape shape = *BroadcastShapes(*BroadcastShapes(a.shape, b.shape), cond.shape);
  cuda::DeviceContext& c = cuda::Context(a.device);
  cuda::Await(c, {&cond, &a, &b});
  StridedTensor out = StridedTensor::Empty(shape, a.dtype, a.device);
  const auto index = cuda::IndexFor<4>(shape,
                                       {out.strides, cuda::BroadcastStrides(cond, shape),
                                        cuda::BroadcastStrides(a, shape), cuda::BroadcastStrides(b, shape)},
                                       "where");
  cuda::CheckLaunch(cuda::kernels::Where(a.dtype, static_cast<const bool*>(cond.data()), a.data(), b.data(),
                                         out.mutable_data(), index, shape.numel(), c.stream),
                    "where", a.device);
  return out;
}

}  // namespace kiln
