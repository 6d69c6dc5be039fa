// The Backend concept: what a struct must provide to run kiln tensors. A backend is a plain
// struct with a Device type, a tensor Primitive and static operations; Tensor<B> validates
// every argument (shapes, dtypes, devices, dims) before it calls one, so a backend may assume
// the preconditions written beside each op below. Only index *values* (gather, index_select)
// are the backend's to check, since they live on its device.
#ifndef KILN_TENSOR_BACKEND_H_
#define KILN_TENSOR_BACKEND_H_

#include <concepts>
#include <string>
#include <string_view>

#include "absl/types/span.h"
#include "tensor/dtype.h"
#include "tensor/ops.h"
#include "tensor/scalar.h"
#include "tensor/shape.h"
#include "tensor/tensor_data.h"

namespace kiln {

// A device: a value that names one place tensors live ("cpu:0"), comparable and printable.
template <class D>
concept DeviceType = std::regular<D> && requires(const D& d) {
  { d.ToString() } -> std::convertible_to<std::string>;
};

template <class B>
concept Backend = DeviceType<typename B::Device> && std::copyable<typename B::Primitive> &&
    std::default_initializable<typename B::Primitive> &&
    requires(const typename B::Primitive& p, const typename B::Device& device, const Shape& shape, DType dtype,
             const TensorData& data, Scalar value, UnaryOp unary_op, BinaryOp binary_op, ReduceOp reduce_op,
             absl::Span<const int64_t> dims, absl::Span<const typename B::Primitive> list, int64_t i, bool keepdim) {
  { B::Name() } -> std::convertible_to<std::string_view>;
  // Metadata.
  { B::shape(p) } -> std::convertible_to<const Shape&>;
  { B::dtype(p) } -> std::same_as<DType>;
  { B::device(p) } -> std::convertible_to<typename B::Device>;
  // Creation and transfer. Throws kiln::Error for a device that does not exist.
  { B::from_data(data, device) } -> std::same_as<typename B::Primitive>;
  { B::to_data(p) } -> std::same_as<TensorData>;
  { B::full(shape, value, dtype, device) } -> std::same_as<typename B::Primitive>;
  { B::to_device(p, device) } -> std::same_as<typename B::Primitive>;
  // Float -> int saturates and maps NaN to 0; anything -> bool is `!= 0`.
  { B::cast(p, dtype) } -> std::same_as<typename B::Primitive>;
  // Element-wise. unary: float ops only get float inputs. binary: equal dtypes (not bool
  // for arithmetic), shapes broadcastable; comparisons give bool; integer arithmetic
  // wraps, integer division truncates and throws InvalidArgument on a zero divisor.
  { B::unary(unary_op, p) } -> std::same_as<typename B::Primitive>;
  { B::binary(binary_op, p, p) } -> std::same_as<typename B::Primitive>;
  // where(cond, a, b): cond is bool; a and b share a dtype; all three broadcast.
  { B::where(p, p, p) } -> std::same_as<typename B::Primitive>;
  // Reductions over `dims` (sorted, unique, in range, non-empty). Mean of integers
  // truncates; max/min of an empty extent is not called.
  { B::reduce(reduce_op, p, dims, keepdim) } -> std::same_as<typename B::Primitive>;
  // Index (i64) of the first maximum along dim i (normalised, non-empty extent).
  { B::argmax(p, i, keepdim) } -> std::same_as<typename B::Primitive>;
  // [..., m, k] x [..., k, n] (rank >= 2, batch dims broadcast), same float dtype.
  { B::matmul(p, p) } -> std::same_as<typename B::Primitive>;
  // Layout. reshape: same element count; the result is dense (row-major), so a reshape
  // to its own shape materialises a view. permute: a permutation of 0..rank-1.
  // expand: shape is a broadcast of p's shape. slice(dim, start, end, step): 0 <= start
  // <= end <= size, step >= 1. cat: non-empty, shapes equal except along i.
  { B::reshape(p, shape) } -> std::same_as<typename B::Primitive>;
  { B::permute(p, dims) } -> std::same_as<typename B::Primitive>;
  { B::expand(p, shape) } -> std::same_as<typename B::Primitive>;
  { B::slice(p, i, i, i, i) } -> std::same_as<typename B::Primitive>;
  { B::cat(list, i) } -> std::same_as<typename B::Primitive>;
  // gather(p, dim, index): index is i64 of p's rank, index.shape[d] <= p.shape[d] for
  // d != dim. index_select(p, dim, index): index is 1-D i64. Both throw OutOfRange for
  // an index value outside [0, p.shape[dim]).
  { B::gather(p, i, p) } -> std::same_as<typename B::Primitive>;
  { B::index_select(p, i, p) } -> std::same_as<typename B::Primitive>;
  // scatter_add(src, dim, index, shape): zeros of `shape` (src's dtype) plus src[pos]
  // added at `pos` with its `dim` coordinate replaced by index[pos]. index is i64 of src's
  // shape, no larger than `shape` in dims other than dim; values checked (OutOfRange).
  // The backward of gather, index_select and strided slices.
  { B::scatter_add(p, i, p, shape) } -> std::same_as<typename B::Primitive>;
};

}  // namespace kiln

#endif  // KILN_TENSOR_BACKEND_H_
