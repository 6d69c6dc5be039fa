// How a reduction (or argmax) along some dims sees its input: as a dense [outer, reduced, inner]
// tensor, with the reduced dims one contiguous block in the middle. Shape-only, so the CPU,
// Vulkan and CUDA backends arrange their inputs the same way and their kernels need only
// these three extents.
#ifndef KILN_TENSOR_REDUCE_LAYOUT_H_
#define KILN_TENSOR_REDUCE_LAYOUT_H_

#include <cstdint>

#include "absl/types/span.h"
#include "tensor/shape.h"

namespace kiln {

struct ReduceLayout {
  int64_t outer = 1, reduced = 1, inner = 1;
  // Empty when the reduced dims are already one block (consecutive): the input is used as is,
  // made dense. Otherwise the kept dims then the reduced ones; the permuted input, made dense,
  // is [outer, reduced, 1].
  Dims permutation;
};

// True when the sorted, distinct `dims` are consecutive (one block of a row-major tensor).
inline bool ConsecutiveDims(absl::Span<const int64_t> sorted_dims) {
  return sorted_dims.back() - sorted_dims.front() + 1 == static_cast<int64_t>(sorted_dims.size());
}

// `sorted_dims`: non-empty, sorted and distinct (as NormalizeReduceDims returns them). In both
// arrangements the output position of a result is o * inner + i, as in ReducedShape.
ReduceLayout ArrangeReduce(const Shape& shape, absl::Span<const int64_t> sorted_dims);

// The primitive `p` of backend B (see backend.h) laid out as `l` says: made dense, after the
// permutation if there is one (a copy only when `p` is not already so).
template <class B>
typename B::Primitive ArrangeForReduce(const typename B::Primitive& p, const ReduceLayout& l) {
  return l.permutation.empty() ? B::contiguous(p) : B::contiguous(B::permute(p, l.permutation));
}

}  // namespace kiln

#endif  // KILN_TENSOR_REDUCE_LAYOUT_H_
