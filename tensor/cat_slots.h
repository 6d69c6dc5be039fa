// cat along a dim as slice-by-slice copies: the output's shape, and for each part the slot of
// the output it fills (a slice along the dim, so a strided view and no copy). Works on any
// strided view (see strided_view.h); the CPU, Vulkan and CUDA backends differ only in the copy.
#ifndef KILN_TENSOR_CAT_SLOTS_H_
#define KILN_TENSOR_CAT_SLOTS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "tensor/shape.h"
#include "tensor/strided_view.h"

namespace kiln {

// The shape of the parts (which agree but along `dim`) with their sizes along `dim` summed.
template <class V>
Shape CatShape(absl::Span<const V> parts, int64_t dim) {
  Dims dims(parts[0].shape.dims().begin(), parts[0].shape.dims().end());
  dims[dim] = 0;
  for (const V& part : parts) dims[dim] += part.shape[dim];
  return Shape(dims);
}

// Calls fill(part, slot) in order for every part with elements; `slot` is the view of `out`
// (shaped CatShape(parts, dim)) where that part belongs.
template <class V, class Fill>
void ForEachCatSlot(const V& out, absl::Span<const V> parts, int64_t dim, Fill&& fill) {
  int64_t at = 0;  // running offset along dim
  for (const V& part : parts) {
    const int64_t size = part.shape[dim];
    if (size > 0) fill(part, strided::Slice(out, dim, at, at + size, 1));
    at += size;
  }
}

}  // namespace kiln

#endif  // KILN_TENSOR_CAT_SLOTS_H_
