// Index kernels: the range check of index values, gather/index_select, and scatter_add with
// atomic adds (floating sums may then differ in the last bits between runs).
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace kiln::cuda::kernels {
namespace {

__global__ void CheckIndicesKernel(const int64_t* index, StridedIndex<1> layout, int64_t n, int64_t size,
                                   unsigned long long* first_bad) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t off[1];
    layout.Offsets(i, off);
    const int64_t v = index[off[0]];
    if (v < 0 || v >= size) atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
}

template <class T>
__global__ void GatherKernel(const T* src, const int64_t* ids, T* out, StridedIndex<3> index, int64_t n, int64_t step) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t off[3];
    index.Offsets(i, off);
    out[off[0]] = src[off[2] + ids[off[1]] * step];
  }
}

template <class T>
__device__ __forceinline__ void AtomicAdd(T* at, T value) {
  if constexpr (std::is_same_v<T, int64_t>) {
    // Two's complement addition is the same bits signed or unsigned: this wraps like the CPU.
    atomicAdd(reinterpret_cast<unsigned long long*>(at), static_cast<unsigned long long>(value));
  } else {
    atomicAdd(at, value);
  }
}

template <class T>
__global__ void ScatterAddKernel(const T* src, const int64_t* ids, T* out, StridedIndex<3> index, int64_t n,
                                 int64_t step) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t off[3];
    index.Offsets(i, off);
    AtomicAdd(out + off[0] + ids[off[1]] * step, src[off[2]]);
  }
}

}  // namespace

cudaError_t CheckIndices(const int64_t* index, const StridedIndex<1>& layout, int64_t n, int64_t size,
                         unsigned long long* first_bad, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  CheckIndicesKernel<<<BlocksFor(n), kThreads, 0, stream>>>(index, layout, n, size, first_bad);
  return cudaGetLastError();
}

cudaError_t Gather(DType dtype, const void* src, const int64_t* ids, void* out, const StridedIndex<3>& index, int64_t n,
                   int64_t step, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    GatherKernel<T>
        <<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const T*>(src), ids, static_cast<T*>(out), index, n, step);
  });
  return cudaGetLastError();
}

cudaError_t ScatterAdd(DType dtype, const void* src, const int64_t* ids, void* out, const StridedIndex<3>& index,
                       int64_t n, int64_t step, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForDType(dtype, [&](auto v) {
    using T = decltype(v);
    // The CPU backend leaves bool zeros too; the halves are added in f32 by the host.
    if constexpr (!std::is_same_v<T, bool> && !kIsDeviceHalf<T>) {
      ScatterAddKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const T*>(src), ids, static_cast<T*>(out),
                                                                 index, n, step);
    }
  });
  return cudaGetLastError();
}

}  // namespace kiln::cuda::kernels
