#include "tensor/shape.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tensor/error.h"

namespace kiln {

Shape::Shape(std::initializer_list<int64_t> dims) : dims_(dims.begin(), dims.end()) { Validate(); }

Shape::Shape(absl::Span<const int64_t> dims) : dims_(dims.begin(), dims.end()) { Validate(); }

void Shape::Validate() {
  numel_ = 1;
  bool empty = false;
  for (int64_t d : dims_) {
    if (d < 0) ThrowInvalidArgument("shape %s has a negative dimension", ToString());
    if (d == 0) empty = true;
  }
  // Overflow is checked on the non-zero dims so that [0, huge] stays legal.
  int64_t product = 1;
  for (int64_t d : dims_) {
    if (d == 0) continue;
    if (product > std::numeric_limits<int64_t>::max() / d) {
      ThrowInvalidArgument("shape %s has more elements than fit in int64", ToString());
    }
    product *= d;
  }
  numel_ = empty ? 0 : product;
}

Dims Shape::ContiguousStrides() const {
  Dims strides(dims_.size());
  int64_t stride = 1;
  for (int64_t i = rank() - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= dims_[i] == 0 ? 1 : dims_[i];
  }
  return strides;
}

std::string Shape::ToString() const { return absl::StrCat("[", absl::StrJoin(dims_, ","), "]"); }

int64_t NormalizeDim(int64_t dim, int64_t rank, const Shape& shape, const char* what) {
  if (dim < -rank || dim >= rank || rank == 0) {
    ThrowOutOfRange("%s: dim %d is out of range for shape %s (rank %d; valid dims are %d..%d)", what, dim,
                    shape.ToString(), rank, -rank, rank - 1);
  }
  return dim < 0 ? dim + rank : dim;
}

}  // namespace kiln
