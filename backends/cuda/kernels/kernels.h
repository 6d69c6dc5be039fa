// The CUDA kernels' launch functions, called by the backend's host code. Plain C++ with CUDA
// runtime types only (no Abseil), since nvcc compiles the files that define them. Every
// function enqueues work on `stream` and returns the launch error (cudaSuccess when there
// was nothing to do); pointers are device pointers already offset to the first element.
#ifndef KILN_BACKENDS_CUDA_KERNELS_KERNELS_H_
#define KILN_BACKENDS_CUDA_KERNELS_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/kernels/strided_index.h"
#include "tensor/dtype.h"
#include "tensor/ops.h"

namespace kiln::cuda::kernels {

// out[0, n) = value (given both ways so integers stay exact).
cudaError_t Fill(DType dtype, void* out, int64_t n, double fvalue, int64_t ivalue, cudaStream_t stream);

// out[offset 0] = convert(in[offset 1]) for n elements: copies, casts and writes into views.
// Float -> int saturates (NaN -> 0); anything -> bool is != 0.
cudaError_t Copy(DType from, DType to, const void* in, void* out, const StridedIndex<2>& index, int64_t n,
                 cudaStream_t stream);

// out (operand 0, dense) = op(in (operand 1)).
cudaError_t Unary(UnaryOp op, DType dtype, const void* in, void* out, const StridedIndex<2>& index, int64_t n,
                  cudaStream_t stream);

// out (operand 0, dense) = op(a (1), b (2)). Comparisons write bool. An integer division by
// zero writes 0 there and sets *div_by_zero (a device int the caller zeroed and reads back).
cudaError_t Binary(BinaryOp op, DType dtype, const void* a, const void* b, void* out, const StridedIndex<3>& index,
                   int64_t n, int* div_by_zero, cudaStream_t stream);

// out (0) = cond (1) ? a (2) : b (3).
cudaError_t Where(DType dtype, const bool* cond, const void* a, const void* b, void* out, const StridedIndex<4>& index,
                  int64_t n, cudaStream_t stream);

// A dense [outer, reduced, inner] input reduced over its middle dim in `splits` chunks of
// `chunk` elements: out is [outer, splits, inner]. With splits == 1 that is the result;
// otherwise a second call over the partials (reduced = splits) finishes it. kMean sums (the
// caller divides). NaN propagates through max and min; integer sums wrap. With inner >=
// kColumnTile a block reduces a tile of that many columns over its chunk (the caller counts
// work items as outer * tiles * splits); with 1 < inner < kColumnTile a thread reduces one
// output.
inline constexpr int64_t kColumnTile = 32;
inline int64_t ColumnTiles(int64_t inner) { return (inner + kColumnTile - 1) / kColumnTile; }
cudaError_t Reduce(ReduceOp op, DType dtype, const void* in, void* out, int64_t outer, int64_t reduced, int64_t inner,
                   int64_t chunk, int64_t splits, cudaStream_t stream);

// data[0, n) /= divisor (integer division truncates), for mean.
cudaError_t DivideBy(DType dtype, void* data, int64_t n, int64_t divisor, cudaStream_t stream);

// out[o, i] = index of the first maximum of in[o, :, i] (NaN is the maximum).
cudaError_t Argmax(DType dtype, const void* in, int64_t* out, int64_t outer, int64_t reduced, int64_t inner,
                   cudaStream_t stream);

// *first_bad = min over positions p of the (strided) i64 index with a value outside
// [0, size); the caller sets it to UINT64_MAX first and reads it back.
cudaError_t CheckIndices(const int64_t* index, const StridedIndex<1>& layout, int64_t n, int64_t size,
                         unsigned long long* first_bad, cudaStream_t stream);

// out (0, dense) = src[offset 2 + ids[offset 1] * step]: gather and index_select.
cudaError_t Gather(DType dtype, const void* src, const int64_t* ids, void* out, const StridedIndex<3>& index, int64_t n,
                   int64_t step, cudaStream_t stream);

// out[offset 0 + ids[offset 1] * step] += src[offset 2], atomically (out holds zeros).
cudaError_t ScatterAdd(DType dtype, const void* src, const int64_t* ids, void* out, const StridedIndex<3>& index,
                       int64_t n, int64_t step, cudaStream_t stream);

}  // namespace kiln::cuda::kernels

#endif  // KILN_BACKENDS_CUDA_KERNELS_KERNELS_H_
