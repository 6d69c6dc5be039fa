#include "tensor/reduce_layout.h"

namespace kiln {

ReduceLayout ArrangeReduce(const Shape& shape, absl::Span<const int64_t> sorted_dims) {
  ReduceLayout l;
  if (ConsecutiveDims(sorted_dims)) {
    const int64_t first = sorted_dims.front(), last = sorted_dims.back();
    for (int64_t d = 0; d < shape.rank(); ++d) {
      (d < first ? l.outer : d <= last ? l.reduced : l.inner) *= shape[d];
    }
    return l;
  }
  // A gap between reduced dims: move them all to the end, after the kept dims in their order.
  for (int64_t d = 0, k = 0; d < shape.rank(); ++d) {
    if (k < static_cast<int64_t>(sorted_dims.size()) && sorted_dims[k] == d) {
      ++k;
      l.reduced *= shape[d];
    } else {
      l.permutation.push_back(d);
      l.outer *= shape[d];
    }
  }
  l.permutation.insert(l.permutation.end(), sorted_dims.begin(), sorted_dims.end());
  return l;
}

}  // namespace kiln
