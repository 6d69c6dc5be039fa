// Shards of the model state as tensors. Every parameter is sharded on its own, as
// nn/shard_layout.h says (N chunks of c = ceil(n / N) flat elements, zero-padded): per
// parameter rather than one flat buffer, so an optimizer's per-parameter settings (weight
// decay groups) apply to a chunk as to its parameter, and a checkpoint names each chunk by it.
// A bucket of parameters travels as one tensor of N*C elements (C: the sum of their chunks),
// member-major: one reduce-scatter hands each member its chunk of every parameter of the
// bucket, and one all-gather of the members' chunks rebuilds every parameter.
#ifndef KILN_DISTRIBUTED_SHARD_LAYOUT_H_
#define KILN_DISTRIBUTED_SHARD_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "nn/shard_layout.h"
#include "tensor/tensor.h"

namespace kiln::distributed {

inline int64_t ChunkSize(int64_t numel, int members) { return nn::ShardChunkSize(numel, members); }

// `full` flattened and zero-padded to `members` chunks, as a [members, chunk] matrix.
template <Backend B>
Tensor<B> AsChunkRows(const Tensor<B>& full, int members) {
  const int64_t n = full.numel(), c = ChunkSize(n, members);
  Tensor<B> flat = full.reshape({-1});
  if (n < c * members) {
    const Tensor<B> padding = Tensor<B>::zeros({c * members - n}, full.dtype(), full.device());
    flat = Tensor<B>::cat(std::vector<Tensor<B>>{flat, padding}, 0);
  }
  return flat.reshape({members, c});
}

// Member g's chunk of `full` (any shape): c elements, zero-padded.
template <Backend B>
Tensor<B> ChunkOf(const Tensor<B>& full, int g, int members) {
  const int64_t c = ChunkSize(full.numel(), members);
  const auto [begin, end] = nn::ShardRangeOf(full.numel(), members, g);
  if (end - begin == c) return full.reshape({-1}).slice(0, begin, end);
  const Tensor<B> padding = Tensor<B>::zeros({c - (end - begin)}, full.dtype(), full.device());
  if (end == begin) return padding;
  return Tensor<B>::cat(std::vector<Tensor<B>>{full.reshape({-1}).slice(0, begin, end), padding}, 0);
}

// The bucket tensor of `tensors` (one dtype and device): N*C elements, member-major.
template <Backend B>
Tensor<B> PackMemberMajor(absl::Span<const Tensor<B>> tensors, int members) {
  std::vector<Tensor<B>> rows;
  rows.reserve(tensors.size());
  for (const Tensor<B>& t : tensors) rows.push_back(AsChunkRows(t, members));
  return (rows.size() == 1 ? rows[0] : Tensor<B>::cat(rows, 1)).reshape({-1});
}

// One member's part of a bucket (C elements) cut into its chunk of each parameter.
template <Backend B>
std::vector<Tensor<B>> SplitChunks(const Tensor<B>& part, absl::Span<const int64_t> chunks) {
  std::vector<Tensor<B>> out;
  int64_t at = 0;
  for (int64_t c : chunks) {
    out.push_back(part.slice(0, at, at + c));
    at += c;
  }
  return out;
}

// One tensor of `shape` out of the gathered [N, C] rows, its chunks at column `at`.
template <Backend B>
Tensor<B> UnpackChunkRows(const Tensor<B>& rows, int64_t at, const Shape& shape, int members) {
  const int64_t n = shape.numel(), c = ChunkSize(n, members);
  return rows.slice(1, at, at + c).reshape({-1}).slice(0, 0, n).reshape(shape.dims());
}

// The inverse of PackMemberMajor: the N*C gathered elements back into tensors of `shapes`,
// each handed to take(its index in `shapes`, tensor) as soon as it is unpacked (so a caller
// that replaces a tensor by it frees the old one before the next is copied).
template <Backend B, class Take>
void UnpackMemberMajorEach(const Tensor<B>& gathered, absl::Span<const Shape> shapes, int members, Take take) {
  const Tensor<B> rows = gathered.reshape({members, -1});
  int64_t at = 0;
  for (size_t j = 0; j < shapes.size(); ++j) {
    take(j, UnpackChunkRows(rows, at, shapes[j], members));
    at += ChunkSize(shapes[j].numel(), members);
  }
}

template <Backend B>
std::vector<Tensor<B>> UnpackMemberMajor(const Tensor<B>& gathered, absl::Span<const Shape> shapes, int members) {
  std::vector<Tensor<B>> out;
  UnpackMemberMajorEach(gathered, shapes, members, [&](size_t, Tensor<B> t) { out.push_back(std::move(t)); });
  return out;
}

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_SHARD_LAYOUT_H_
