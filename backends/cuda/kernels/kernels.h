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
// output. A bf16 or f16 input is combined in f32 and `out` is f32 (the caller rounds the
// finished result once, after a mean's division).
inline constexpr int64_t kColumnTile = 32;
inline int64_t ColumnTiles(int64_t inner) { return (inner + kColumnTile - 1) / kColumnTile; }
cudaError_t Reduce(ReduceOp op, DType dtype, const void* in, void* out, int64_t outer, int64_t reduced, int64_t inner,
                   int64_t chunk, int64_t splits, cudaStream_t stream);

// data[0, n) /= divisor (integer division truncates), for mean; not for the halves (their
// sums are f32).
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

// out[offset 0 + ids[offset 1] * step] += src[offset 2], atomically (out holds zeros). Not
// for the halves (a half atomic add would round at every add; the host adds those in f32).
cudaError_t ScatterAdd(DType dtype, const void* src, const int64_t* ids, void* out, const StridedIndex<3>& index,
                       int64_t n, int64_t step, cudaStream_t stream);

// The fused kernels of tensor/fused_ops.h (kernels/fused.cu), over dense row-major [rows, n]
// operands of f32 or f64 (any other dtype, the halves included, returns
// cudaErrorInvalidValue: the host widens those, HalfInF32); statistics are
// [rows]. Causal: row r is row r % sq of an [sq, n] matrix and keeps columns
// j <= r % sq + n - sq; a row that keeps none is NaN (its gradient 0, as masked columns').
cudaError_t SoftmaxLast(DType dtype, const void* x, void* y, int64_t rows, int64_t n, int64_t sq, bool causal,
                        bool log_softmax, cudaStream_t stream);
cudaError_t SoftmaxLastBackward(DType dtype, const void* y, const void* gy, void* gx, int64_t rows, int64_t n,
                                int64_t sq, bool causal, bool log_softmax, cudaStream_t stream);

// weight and bias are [n] or null; mean is rstd again for rms.
cudaError_t NormLast(DType dtype, const void* x, const void* weight, const void* bias, void* y, void* mean, void* rstd,
                     int64_t rows, int64_t n, double eps, bool rms, cudaStream_t stream);
cudaError_t NormLastBackward(DType dtype, const void* gy, const void* x, const void* weight, const void* mean,
                             const void* rstd, void* gx, int64_t rows, int64_t n, bool rms, cudaStream_t stream);

// The column sums of a norm's backward: weight_grad = sum over rows of gy * xhat and
// bias_grad = sum of gy (either null when not wanted, with its partial). Each chunk of
// NormRowChunk rows is summed into partial_* ([NormRowChunks, n], scratch the caller
// allocates), then the chunks in order: the result depends on the shape only, never on the
// device or launch.
inline int64_t NormRowChunk(int64_t rows) {
  constexpr int64_t kChunk = 64, kMaxChunks = 65535;  // a grid's y dimension
  const int64_t fit = (rows + kMaxChunks - 1) / kMaxChunks;
  return fit > kChunk ? fit : kChunk;
}
inline int64_t NormRowChunks(int64_t rows) { return (rows + NormRowChunk(rows) - 1) / NormRowChunk(rows); }
cudaError_t NormColumnSums(DType dtype, const void* gy, const void* x, const void* mean, const void* rstd,
                           void* partial_w, void* partial_b, void* weight_grad, void* bias_grad, int64_t rows,
                           int64_t n, bool rms, cudaStream_t stream);

// Element-wise over n dense elements.
cudaError_t Gelu(DType dtype, const void* x, void* y, int64_t n, bool tanh_form, cudaStream_t stream);
cudaError_t GeluBackward(DType dtype, const void* x, const void* gy, void* gx, int64_t n, bool tanh_form,
                         cudaStream_t stream);

// logits [rows, classes], targets/loss/lse [rows]. A target outside [0, classes) other than
// ignore_index lowers *first_bad (a device value the caller sets to UINT64_MAX and reads back)
// to its row; the backward never indexes by a target, so it needs no check.
cudaError_t CrossEntropy(DType dtype, const void* logits, const int64_t* targets, void* loss, void* lse, int64_t rows,
                         int64_t classes, int64_t ignore_index, double smoothing, unsigned long long* first_bad,
                         cudaStream_t stream);
cudaError_t CrossEntropyBackward(DType dtype, const void* logits, const int64_t* targets, const void* lse,
                                 const void* g, void* grad, int64_t rows, int64_t classes, int64_t ignore_index,
                                 double smoothing, cudaStream_t stream);

}  // namespace kiln::cuda::kernels

#endif  // KILN_BACKENDS_CUDA_KERNELS_KERNELS_H_
