// Shape: the extent of each dimension of a tensor (row-major, rank 0 = scalar).
#ifndef KILN_TENSOR_SHAPE_H_
#define KILN_TENSOR_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace kiln {

using Dims = absl::InlinedVector<int64_t, 6>;

class Shape {
 public:
  Shape() = default;  // rank 0: one element
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(absl::Span<const int64_t> dims);

  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t numel() const { return numel_; }
  int64_t operator[](int64_t i) const { return dims_[i]; }
  absl::Span<const int64_t> dims() const { return dims_; }
  // Row-major strides in elements for a contiguous tensor of this shape.
  Dims ContiguousStrides() const;
  std::string ToString() const;  // "[2,3]"

  friend bool operator==(const Shape& a, const Shape& b) { return a.dims_ == b.dims_; }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  void Validate();  // non-negative dims, element count fits in int64
  Dims dims_;
  int64_t numel_ = 1;
};

// Maps a possibly negative dimension index into [0, rank); throws OutOfRange naming `what`.
int64_t NormalizeDim(int64_t dim, int64_t rank, const Shape& shape, const char* what);

}  // namespace kiln

#endif  // KILN_TENSOR_SHAPE_H_
