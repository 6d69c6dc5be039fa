#include "tensor/shape_rules.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tensor/error.h"

namespace kiln {

std::optional<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  if (a == b) return a;
  const int64_t rank = std::max(a.rank(), b.rank());
  Dims out(rank);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.rank() ? 1 : a[i - (rank - a.rank())];
    const int64_t db = i < rank - b.rank() ? 1 : b[i - (rank - b.rank())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return Shape(out);
}

bool BroadcastsTo(const Shape& from, const Shape& to) {
  const auto joined = BroadcastShapes(from, to);
  return from.rank() <= to.rank() && joined && *joined == to;
}

Dims NormalizeReduceDims(absl::Span<const int64_t> dims, const Shape& shape, const char* what) {
  Dims out;
  if (dims.empty()) {
    for (int64_t i = 0; i < shape.rank(); ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) out.push_back(NormalizeDim(d, shape.rank(), shape, what));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    ThrowInvalidArgument("%s: dims [%s] name dim %d twice (shape %s)", what, absl::StrJoin(dims, ","),
                         *std::adjacent_find(out.begin(), out.end()), shape.ToString());
  }
  return out;
}

Shape ReducedShape(const Shape& shape, absl::Span<const int64_t> sorted_dims, bool keepdim) {
  Dims out;
  size_t next = 0;
  for (int64_t i = 0; i < shape.rank(); ++i) {
    const bool reduced = next < sorted_dims.size() && sorted_dims[next] == i;
    if (reduced) ++next;
    if (!reduced)
      out.push_back(shape[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return Shape(out);
}

Shape InferReshape(const Shape& from, absl::Span<const int64_t> dims) {
  Dims out(dims.begin(), dims.end());
  int64_t infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer_at >= 0) {
        ThrowInvalidArgument("reshape of %s to [%s]: only one dim may be -1", from.ToString(),
                             absl::StrJoin(dims, ","));
      }
      infer_at = static_cast<int64_t>(i);
    } else if (out[i] < 0) {
      ThrowInvalidArgument("reshape of %s to [%s]: dim %d is negative", from.ToString(), absl::StrJoin(dims, ","),
                           out[i]);
    } else {
      known = known * out[i];
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || from.numel() % known != 0) {
      ThrowInvalidArgument("reshape of %s (%d elements) to [%s]: the -1 cannot be inferred", from.ToString(),
                           from.numel(), absl::StrJoin(dims, ","));
    }
    out[infer_at] = from.numel() / known;
  }
  Shape to(out);
  if (to.numel() != from.numel()) {
    ThrowInvalidArgument("reshape of %s (%d elements) to %s (%d elements): counts differ", from.ToString(),
                         from.numel(), to.ToString(), to.numel());
  }
  return to;
}

MatmulShapes MatmulShape(const Shape& a, const Shape& b) {
  if (a.rank() < 2 || b.rank() < 2) return {std::nullopt, "both operands need rank >= 2"};
  const int64_t k = a[a.rank() - 1];
  if (k != b[b.rank() - 2]) {
    return {std::nullopt, absl::StrFormat("inner dims differ (%d vs %d)", k, b[b.rank() - 2])};
  }
  const Shape batch_a(a.dims().subspan(0, a.rank() - 2));
  const Shape batch_b(b.dims().subspan(0, b.rank() - 2));
  const auto batch = BroadcastShapes(batch_a, batch_b);
  if (!batch) {
    return {std::nullopt,
            absl::StrFormat("batch dims %s and %s do not broadcast", batch_a.ToString(), batch_b.ToString())};
  }
  Dims out(batch->dims().begin(), batch->dims().end());
  out.push_back(a[a.rank() - 2]);
  out.push_back(b[b.rank() - 1]);
  return {Shape(out), ""};
}

Shape WithDim(const Shape& shape, int64_t dim, int64_t size) {
  Dims out(shape.dims().begin(), shape.dims().end());
  out[dim] = size;
  return Shape(out);
}

}  // namespace kiln
