// Shape arithmetic shared by every backend: broadcasting, reduced shapes, reshape inference,
// matmul shapes. Pure functions of shapes; they report what is wrong, the caller adds who.
#ifndef KILN_TENSOR_SHAPE_RULES_H_
#define KILN_TENSOR_SHAPE_RULES_H_

#include <optional>
#include <string>

#include "tensor/shape.h"

namespace kiln {

// NumPy broadcasting: dims aligned from the right, each pair equal or one of them 1.
std::optional<Shape> BroadcastShapes(const Shape& a, const Shape& b);
// True when `from` broadcasts to exactly `to`.
bool BroadcastsTo(const Shape& from, const Shape& to);

// Normalises (negative dims count from the end), sorts and de-duplicates reduction dims;
// an empty list means every dim. Throws OutOfRange / InvalidArgument.
Dims NormalizeReduceDims(absl::Span<const int64_t> dims, const Shape& shape, const char* what);
Shape ReducedShape(const Shape& shape, absl::Span<const int64_t> sorted_dims, bool keepdim);

// Resolves one -1 in `dims` so the element count matches `from`; throws InvalidArgument.
Shape InferReshape(const Shape& from, absl::Span<const int64_t> dims);

// For [..., m, k] x [..., k, n]: the output shape, or a description of what is wrong.
struct MatmulShapes {
  std::optional<Shape> out;
  std::string problem;
};
MatmulShapes MatmulShape(const Shape& a, const Shape& b);

// Shape with `dim` replaced.
Shape WithDim(const Shape& shape, int64_t dim, int64_t size);

}  // namespace kiln

#endif  // KILN_TENSOR_SHAPE_RULES_H_
