// StridedIndex<N>: maps the linear (row-major) position of an element to its offset in each
// of N same-shaped strided operands. Plain C++ shared by host code and CUDA kernels, so the
// index math is tested on the CPU (tests/backends/cuda/strided_index_test.cc).
#ifndef KILN_BACKENDS_CUDA_KERNELS_STRIDED_INDEX_H_
#define KILN_BACKENDS_CUDA_KERNELS_STRIDED_INDEX_H_

#include <cstdint>

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif

namespace kiln::cuda {

// Dims a kernel can walk after coalescing. Kernel arguments are passed by value (at most 4 KiB
// on these architectures), so the table is bounded; a view needing more is copied in steps.
inline constexpr int kMaxDims = 12;

template <int N>
struct StridedIndex {
  int rank = 0;      // 0: a single element
  bool flat = true;  // every operand is dense row-major: offsets equal the position
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};  // in elements; 0 on broadcast dims

  // offsets[k] = offset of element `linear` in operand k. Assumes 0 <= linear < numel.
  KILN_HOST_DEVICE void Offsets(int64_t linear, int64_t* offsets) const {
    if (flat) {
      for (int k = 0; k < N; ++k) offsets[k] = linear;
      return;
    }
    for (int k = 0; k < N; ++k) offsets[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t size = sizes[d];
      const int64_t next = linear / size;
      const int64_t i = linear - next * size;
      linear = next;
      for (int k = 0; k < N; ++k) offsets[k] += i * strides[k][d];
    }
  }
};

// Builds the index for `rank` dims of `shape` and operand k's `strides[k]`. Size-1 dims are
// dropped and neighbouring dims merged where every operand steps through them as one, so a
// dense tensor becomes one dim (and `flat`). Returns false if more than kMaxDims dims remain.
// Only rank, flat and the first `rank` entries of *out are written (the rest stay as they
// were: zero in a fresh index): every op builds one, and zeroing and copying a whole index
// were most of the time this took.
template <int N>
bool MakeStridedIndex(int rank, const int64_t* shape, const int64_t* const* strides, StridedIndex<N>* out) {
  int kept = 0;
  // Innermost dim first; merged into the previous kept dim when contiguous with it.
  int64_t sizes[64];
  int64_t st[N][64];
  if (rank > 64) return false;
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (kept > 0) {
      bool mergeable = true;
      for (int k = 0; k < N; ++k) {
        mergeable = mergeable && strides[k][d] == st[k][kept - 1] * sizes[kept - 1];
      }
      if (mergeable) {
        sizes[kept - 1] *= shape[d];
        continue;
      }
    }
    sizes[kept] = shape[d];
    for (int k = 0; k < N; ++k) st[k][kept] = strides[k][d];
    ++kept;
  }
  if (kept > kMaxDims) return false;
  StridedIndex<N>& index = *out;
  index.rank = kept;
  bool flat = kept <= 1;
  for (int j = 0; j < kept; ++j) {
    index.sizes[j] = sizes[kept - 1 - j];
    for (int k = 0; k < N; ++k) {
      index.strides[k][j] = st[k][kept - 1 - j];
      if (st[k][kept - 1 - j] != 1) flat = false;
    }
  }
  // Rank 0 (one element) is flat; rank 1 is flat only with unit strides.
  index.flat = flat;
  return true;
}

}  // namespace kiln::cuda

#endif  // KILN_BACKENDS_CUDA_KERNELS_STRIDED_INDEX_H_
