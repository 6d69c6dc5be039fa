// The layout ops of a strided view: any primitive with `shape`, `strides` (in elements, 0 for
// a broadcast dim) and `offset` members. The CPU, Vulkan and CUDA backends all keep tensors as
// such views, so transpose, permute, slice and expand cost no copy on any of them.
#ifndef KILN_TENSOR_STRIDED_VIEW_H_
#define KILN_TENSOR_STRIDED_VIEW_H_

#include <cstdint>

#include "absl/types/span.h"
#include "tensor/shape.h"

namespace kiln::strided {

// Row-major with no gaps (size-1 dims may have any stride).
inline bool IsContiguous(const Shape& shape, const Dims& strides) {
  if (shape.numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t i = shape.rank() - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

// The strides of the first `dims` dims of view `v` (all of them by default; a matmul operand's
// batch dims) broadcast to `shape` (0 where it is broadcast).
template <class V>
Dims BroadcastStrides(const V& v, const Shape& shape, int64_t dims) {
  Dims strides(shape.rank(), 0);
  const int64_t lead = shape.rank() - dims;
  for (int64_t i = 0; i < dims; ++i) strides[lead + i] = v.shape[i] == 1 ? 0 : v.strides[i];
  return strides;
}
template <class V>
Dims BroadcastStrides(const V& v, const Shape& shape) {
  return BroadcastStrides(v, shape, v.shape.rank());
}

template <class V>
V Permute(const V& v, absl::Span<const int64_t> dims) {
  V t = v;
  Dims shape(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    shape[i] = v.shape[dims[i]];
    t.strides[i] = v.strides[dims[i]];
  }
  t.shape = Shape(shape);
  return t;
}

template <class V>
V Expand(const V& v, const Shape& shape) {
  V t = v;
  t.strides = BroadcastStrides(v, shape);
  t.shape = shape;
  return t;
}

template <class V>
V Slice(const V& v, int64_t dim, int64_t start, int64_t end, int64_t step) {
  V t = v;
  const int64_t size = (end - start + step - 1) / step;
  Dims shape(v.shape.dims().begin(), v.shape.dims().end());
  shape[dim] = size;
  t.shape = Shape(shape);
  if (size > 0) t.offset += start * v.strides[dim];
  t.strides[dim] = v.strides[dim] * step;
  return t;
}

// A contiguous view `v` read as `shape` (same element count).
template <class V>
V Reshaped(V v, const Shape& shape) {
  v.shape = shape;
  v.strides = shape.ContiguousStrides();
  return v;
}

}  // namespace kiln::strided

#endif  // KILN_TENSOR_STRIDED_VIEW_H_
