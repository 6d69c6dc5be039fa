// Reductions and argmax as parallel reductions: a warp (short rows) or a whole block (long
// rows) per row segment, combining through warp shuffles and then shared memory; reductions
// over a strided middle dim give each thread one output column (coalesced reads). Long rows
// with few outputs are split into chunks by the caller and finished by a second pass.
#include <cmath>
#include <limits>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace kiln::cuda::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr unsigned kFullMask = 0xffffffffu;

template <class T>
__device__ __forceinline__ T Identity(ReduceOp op) {
  if (op == ReduceOp::kMax) {
    if constexpr (std::is_floating_point_v<T>)
      return -std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::lowest();
  }
  if (op == ReduceOp::kMin) {
    if constexpr (std::is_floating_point_v<T>)
      return std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::max();
  }
  return T(0);
}

template <class T>
__device__ __forceinline__ T Combine(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kMax: return NanMax(a, b);
    case ReduceOp::kMin: return NanMin(a, b);
    default: return WrapAdd(a, b);  // sum, and mean (divided afterwards)
  }
}

template <class T>
__device__ __forceinline__ T WarpReduce(ReduceOp op, T v) {
  for (int delta = kWarp / 2; delta > 0; delta /= 2) {
    v = Combine(op, v, __shfl_down_sync(kFullMask, v, delta));
  }
  return v;
}

// Combines in[begin], in[begin + stride], ... below `end`, four loads at a time so each
// thread keeps several memory requests in flight (one at a time left the H200's bandwidth
// half used). The order is fixed, so results do not vary between runs.
// Halves are loaded to f32 and combined in f32 (MathT).
template <class T>
__device__ __forceinline__ MathT<T> StrideCombine(ReduceOp op, const T* in, int64_t begin, int64_t end,
                                                  int64_t stride) {
  using A = MathT<T>;
  A acc = Identity<A>(op);
  int64_t i = begin;
  for (; i + 3 * stride < end; i += 4 * stride) {
    const A a = Load(in[i]), b = Load(in[i + stride]), c = Load(in[i + 2 * stride]), d = Load(in[i + 3 * stride]);
    acc = Combine(op, acc, Combine(op, Combine(op, a, b), Combine(op, c, d)));
  }
  for (; i < end; i += stride) acc = Combine(op, acc, Load(in[i]));
  return acc;
}

// Segment `item` of a [outer, reduced] input in `splits` chunks: its bounds.
struct Segment {
  int64_t begin, end, row;
};
__device__ __forceinline__ Segment SegmentOf(int64_t item, int64_t reduced, int64_t chunk, int64_t splits) {
  const int64_t row = item / splits;
  const int64_t s = item - row * splits;
  const int64_t begin = s * chunk;
  const int64_t end = begin + chunk < reduced ? begin + chunk : reduced;
  return {row * reduced + begin, row * reduced + end, row};
}

// One warp per segment (short rows).
template <class T>
__global__ void RowsWarpKernel(ReduceOp op, const T* in, MathT<T>* out, int64_t items, int64_t reduced, int64_t chunk,
                               int64_t splits) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warp = GlobalThread() / kWarp;
  const int64_t warps = GridThreads() / kWarp;
  for (int64_t item = warp; item < items; item += warps) {  // warp-uniform loop
    const Segment seg = SegmentOf(item, reduced, chunk, splits);
    MathT<T> acc = StrideCombine(op, in, seg.begin + lane, seg.end, kWarp);
    acc = WarpReduce(op, acc);
    if (lane == 0) out[item] = acc;
  }
}

// One block per segment (long rows).
template <class T>
__global__ void RowsBlockKernel(ReduceOp op, const T* in, MathT<T>* out, int64_t items, int64_t reduced, int64_t chunk,
                                int64_t splits) {
  __shared__ MathT<T> partial[kWarpsPerBlock];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {  // block-uniform loop
    const Segment seg = SegmentOf(item, reduced, chunk, splits);
    MathT<T> acc = StrideCombine(op, in, seg.begin + threadIdx.x, seg.end, blockDim.x);
    acc = WarpReduce(op, acc);
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < kWarpsPerBlock ? partial[lane] : Identity<MathT<T>>(op);
      acc = WarpReduce(op, acc);
      if (lane == 0) out[item] = acc;
    }
    __syncthreads();  // `partial` is reused by the next item
  }
}

// [outer, reduced, inner] with 1 < inner < kColumnTile: a thread per (outer, split, inner)
// output.
template <class T>
__global__ void ColumnsKernel(ReduceOp op, const T* in, MathT<T>* out, int64_t outer, int64_t reduced, int64_t inner,
                              int64_t chunk, int64_t splits) {
  const int64_t total = outer * splits * inner;
  for (int64_t w = GlobalThread(); w < total; w += GridThreads()) {
    const int64_t i = w % inner;
    const int64_t os = w / inner;
    const int64_t s = os % splits, o = os / splits;
    const int64_t begin = s * chunk;
    const int64_t end = begin + chunk < reduced ? begin + chunk : reduced;
    out[w] = StrideCombine(op, in + o * reduced * inner + i, begin * inner, end * inner, inner);
  }
}

// [outer, reduced, inner] with inner >= kColumnTile: a block per (outer, split, tile of 32
// columns). Each warp reads whole 128-byte rows of the tile, every kWarpsPerBlock-th row of
// the chunk, and the warps' partials meet in shared memory: a thread per output alone left
// narrow tensors with too few threads (0.48 of cuBLAS on an H200).
template <class T>
__global__ void ColumnTilesKernel(ReduceOp op, const T* in, MathT<T>* out, int64_t outer, int64_t reduced,
                                  int64_t inner, int64_t chunk, int64_t splits) {
  static_assert(kColumnTile == kWarp);
  __shared__ MathT<T> partial[kWarpsPerBlock][kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t tiles = (inner + kWarp - 1) / kWarp;
  const int64_t items = outer * splits * tiles;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {  // block-uniform loop
    const int64_t tile = item % tiles, os = item / tiles;
    const int64_t s = os % splits, o = os / splits;
    const int64_t column = tile * kWarp + lane;
    const int64_t begin = s * chunk;
    const int64_t end = begin + chunk < reduced ? begin + chunk : reduced;
    MathT<T> acc = Identity<MathT<T>>(op);
    if (column < inner) {
      acc = StrideCombine(op, in + o * reduced * inner + column, (begin + warp) * inner, end * inner,
                          kWarpsPerBlock * inner);
    }
    partial[warp][lane] = acc;
    __syncthreads();
    if (warp == 0) {
      for (int w = 1; w < kWarpsPerBlock; ++w) acc = Combine(op, acc, partial[w][lane]);
      if (column < inner) out[os * inner + column] = acc;
    }
    __syncthreads();  // `partial` is reused by the next item
  }
}

template <class T>
__global__ void DivideKernel(T* data, int64_t n, int64_t divisor) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    data[i] = static_cast<T>(data[i] / static_cast<T>(divisor));
  }
}

// ---- Argmax: (value, index) pairs; NaN is the largest value, ties go to the lower index.
template <class T>
using ShuffleType = std::conditional_t<std::is_same_v<T, bool>, int, MathT<T>>;

template <class V>
__device__ __forceinline__ bool Better(V v, int64_t i, V best, int64_t best_i) {
  return ArgmaxBetter(v, i, best, best_i);
}

template <class V>
__device__ __forceinline__ V Lowest() {
  if constexpr (std::is_floating_point_v<V>)
    return -std::numeric_limits<V>::infinity();
  else
    return std::numeric_limits<V>::lowest();
}

template <class T>
__global__ void ArgmaxRowsKernel(const T* in, int64_t* out, int64_t rows, int64_t reduced) {
  using V = ShuffleType<T>;
  __shared__ V values[kWarpsPerBlock];
  __shared__ int64_t indices[kWarpsPerBlock];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = in + row * reduced;
    V best = Lowest<V>();
    int64_t best_i = kNone;
    for (int64_t i = threadIdx.x; i < reduced; i += blockDim.x) {
      const V v = static_cast<V>(Load(x[i]));
      if (Better(v, i, best, best_i)) best = v, best_i = i;
    }
    for (int delta = kWarp / 2; delta > 0; delta /= 2) {
      const V v = __shfl_down_sync(kFullMask, best, delta);
      const int64_t i = __shfl_down_sync(kFullMask, best_i, delta);
      if (Better(v, i, best, best_i)) best = v, best_i = i;
    }
    if (lane == 0) values[warp] = best, indices[warp] = best_i;
    __syncthreads();
    if (warp == 0) {
      best = lane < kWarpsPerBlock ? values[lane] : Lowest<V>();
      best_i = lane < kWarpsPerBlock ? indices[lane] : kNone;
      for (int delta = kWarp / 2; delta > 0; delta /= 2) {
        const V v = __shfl_down_sync(kFullMask, best, delta);
        const int64_t i = __shfl_down_sync(kFullMask, best_i, delta);
        if (Better(v, i, best, best_i)) best = v, best_i = i;
      }
      // Every element was -inf (or the lowest integer): the first one is the maximum.
      if (lane == 0) out[row] = best_i == kNone ? 0 : best_i;
    }
    __syncthreads();
  }
}

template <class T>
__global__ void ArgmaxColumnsKernel(const T* in, int64_t* out, int64_t outer, int64_t reduced, int64_t inner) {
  using V = ShuffleType<T>;
  const int64_t total = outer * inner;
  for (int64_t w = GlobalThread(); w < total; w += GridThreads()) {
    const T* base = in + (w / inner) * reduced * inner + w % inner;
    V best = static_cast<V>(Load(base[0]));
    int64_t best_i = 0;
    for (int64_t r = 1; r < reduced; ++r) {
      const V v = static_cast<V>(Load(base[r * inner]));
      if (Better(v, r, best, best_i)) best = v, best_i = r;
    }
    out[w] = best_i;
  }
}

}  // namespace

cudaError_t Reduce(ReduceOp op, DType dtype, const void* in, void* out, int64_t outer, int64_t reduced, int64_t inner,
                   int64_t chunk, int64_t splits, cudaStream_t stream) {
  const int64_t items = outer * splits * inner;
  if (items <= 0 || reduced <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* x = static_cast<const T*>(in);
      MathT<T>* y = static_cast<MathT<T>*>(out);
      if (inner >= kColumnTile) {
        const unsigned int blocks = BlocksFor(outer * splits * ColumnTiles(inner), 1);
        ColumnTilesKernel<T><<<blocks, kThreads, 0, stream>>>(op, x, y, outer, reduced, inner, chunk, splits);
      } else if (inner > 1) {
        ColumnsKernel<T><<<BlocksFor(items), kThreads, 0, stream>>>(op, x, y, outer, reduced, inner, chunk, splits);
      } else if (chunk <= 4 * kWarp) {
        RowsWarpKernel<T>
            <<<BlocksFor(items, kWarpsPerBlock), kThreads, 0, stream>>>(op, x, y, items, reduced, chunk, splits);
      } else {
        RowsBlockKernel<T><<<BlocksFor(items, 1), kThreads, 0, stream>>>(op, x, y, items, reduced, chunk, splits);
      }
    }
  });
  return cudaGetLastError();
}

cudaError_t DivideBy(DType dtype, void* data, int64_t n, int64_t divisor, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (!std::is_same_v<T, bool> && !kIsDeviceHalf<T>) {  // halves divide their f32 sums
      DivideKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<T*>(data), n, divisor);
    }
  });
  return cudaGetLastError();
}

cudaError_t Argmax(DType dtype, const void* in, int64_t* out, int64_t outer, int64_t reduced, int64_t inner,
                   cudaStream_t stream) {
  if (outer * inner <= 0 || reduced <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    const T* x = static_cast<const T*>(in);
    if (inner == 1 && reduced > 64) {
      ArgmaxRowsKernel<T><<<BlocksFor(outer, 1), kThreads, 0, stream>>>(x, out, outer, reduced);
    } else {
      ArgmaxColumnsKernel<T><<<BlocksFor(outer * inner), kThreads, 0, stream>>>(x, out, outer, reduced, inner);
    }
  });
  return cudaGetLastError();
}

}  // namespace kiln::cuda::kernels
