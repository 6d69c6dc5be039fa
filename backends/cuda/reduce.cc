// Reductions and argmax. The input is arranged as a dense [outer, reduced, inner] tensor (a
// copy only when the reduced dims are not already one block), then reduced in parallel;
// long reductions with few outputs go in two passes so that every multiprocessor has work.
// bf16 and f16 inputs are read as they are and combined in f32 (partials and the mean's
// division too); the finished result is rounded to the input's dtype once.
#include <cmath>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/launch.h"
#include "tensor/reduce_layout.h"
#include "tensor/shape_rules.h"

namespace kiln {

using cuda::StridedTensor;

namespace {

// How many chunks to split each reduction into: enough work items to fill the device while
// every chunk stays long enough to be worth a pass.
int64_t Splits(int64_t outputs, int64_t reduced, int64_t min_chunk, int64_t target_items) {
  if (reduced <= 2 * min_chunk || outputs >= target_items) return 1;
  const int64_t wanted = (target_items + outputs - 1) / outputs;
  const int64_t most = (reduced + min_chunk - 1) / min_chunk;
  return std::max<int64_t>(1, std::min(wanted, most));
}

}  // namespace

Cuda::Primitive Cuda::reduce(ReduceOp op, const Primitive& p, absl::Span<const int64_t> dims, bool keepdim) {
  if (p.dtype == DType::kBool) ThrowInvalidArgument("%s: not defined for bool", OpName(op));
  const Shape out_shape = ReducedShape(p.shape, dims, keepdim);
  cuda::DeviceContext& c = cuda::Context(p.device);
  cuda::Await(c, {&p});
  // A half reduces into f32 (what the kernels write for it), rounded at the end.
  const bool half = IsHalf(p.dtype);
  const DType acc = half ? DType::kF32 : p.dtype;
  StridedTensor out = StridedTensor::Empty(out_shape, acc, p.device);
  const ReduceLayout l = ArrangeReduce(p.shape, dims);  // shape arithmetic only: no copy yet
  if (out_shape.numel() == 0) return half ? StridedTensor::Empty(out_shape, p.dtype, p.device) : out;
  if (l.reduced == 0) {  // only sum and mean reach here: 0, and 0/0 (NaN for floats)
    const bool nan = op == ReduceOp::kMean && IsFloating(p.dtype);
    cuda::CheckLaunch(cuda::kernels::Fill(acc, out.mutable_data(), out_shape.numel(), nan ? NAN : 0.0, 0, c.stream),
                      OpName(op), p.device);
    return half ? cuda::CopyAs(out, p.dtype) : out;
  }
  const StridedTensor x = ArrangeForReduce<Cuda>(p, l);
  // Work items per chunk of the reduced dim, and how many fill the device: rows and column
  // tiles (a block each): two waves of 8 resident 256-thread blocks per multiprocessor;
  // narrow columns (a thread per output): about one thread per resident slot.
  const bool tiles = l.inner >= cuda::kernels::kColumnTile;
  const int64_t items = l.outer * (tiles ? cuda::kernels::ColumnTiles(l.inner) : l.inner);
  const int64_t target = l.inner == 1 || tiles ? 16 * c.multiprocessors : 2048 * c.multiprocessors;
  const int64_t splits = Splits(items, l.reduced, l.inner == 1 ? 8192 : tiles ? 64 : 256, target);
  const int64_t chunk = (l.reduced + splits - 1) / splits;
  if (splits == 1) {
    cuda::CheckLaunch(cuda::kernels::Reduce(op, p.dtype, x.data(), out.mutable_data(), l.outer, l.reduced, l.inner,
                                            l.reduced, 1, c.stream),
                      OpName(op), p.device);
  } else {
    // Partials [outer, splits, inner], then one more pass over the splits.
    const StridedTensor partial = StridedTensor::Empty(Shape{l.outer, splits, l.inner}, acc, p.device);
    cuda::CheckLaunch(cuda::kernels::Reduce(op, p.dtype, x.data(), partial.mutable_data(), l.outer, l.reduced, l.inner,
                                            chunk, splits, c.stream),
                      OpName(op), p.device);
    cuda::CheckLaunch(cuda::kernels::Reduce(op, acc, partial.data(), out.mutable_data(), l.outer, splits, l.inner,
                                            splits, 1, c.stream),
                      OpName(op), p.device);
  }
  if (op == ReduceOp::kMean) {
    cuda::CheckLaunch(cuda::kernels::DivideBy(acc, out.mutable_data(), out_shape.numel(), l.reduced, c.stream),
                      OpName(op), p.device);
  }
  return half ? cuda::CopyAs(out, p.dtype) : out;
}

Cuda::Primitive Cuda::argmax(const Primitive& p, int64_t dim, bool keepdim) {
  const int64_t dims[] = {dim};
  const Shape out_shape = ReducedShape(p.shape, dims, keepdim);
  cuda::DeviceContext& c = cuda::Context(p.device);
  cuda::Await(c, {&p});
  StridedTensor out = StridedTensor::Empty(out_shape, DType::kI64, p.device);
  if (out_shape.numel() == 0) return out;
  const ReduceLayout l = ArrangeReduce(p.shape, dims);
  const StridedTensor x = ArrangeForReduce<Cuda>(p, l);
  cuda::CheckLaunch(cuda::kernels::Argmax(p.dtype, x.data(), static_cast<int64_t*>(out.mutable_data()), l.outer,
                                          l.reduced, l.inner, c.stream),
                    "argmax", p.device);
  return out;
}

}  // namespace kiln
